"""``python -m metis``: the command line (``metis --help``), as ``python -m metis.cli``."""

import sys

from metis.cli import main

sys.exit(main())
