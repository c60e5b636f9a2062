"""``python -m metis.cli``."""

import sys

from metis.cli import main

sys.exit(main())
