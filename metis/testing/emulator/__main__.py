"""``python -m metis.testing.emulator --port 8900``."""

import sys

from metis.testing.emulator.cli import main

sys.exit(main(sys.argv[1:]))
