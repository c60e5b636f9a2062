"""The test suite (CONTRIBUTING.md, "Tests").

Bytecode: every xdist worker imports every test module to collect it, and pytest rewrites the
asserts of each; with ``PYTHONDONTWRITEBYTECODE`` set nothing of that is cached, and each
process pays it again on every run (about half the collection's CPU time). The suite writes
its bytecode to ``__pycache__`` (git-ignored) whatever the environment says, from before pytest
loads the plugins other packages install (tests/bytecode.py).
"""

import sys

sys.dont_write_bytecode = False
