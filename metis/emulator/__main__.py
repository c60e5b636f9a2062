"""``python -m metis.emulator --port 8900``."""

import sys

from metis.emulator.cli import main

sys.exit(main(sys.argv[1:]))
