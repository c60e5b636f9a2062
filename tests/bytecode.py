"""Loaded before the plugins other packages install (``-p tests.bytecode`` in pyproject.toml's
``addopts``; ``pythonpath`` makes ``tests`` importable from any directory): importing the
``tests`` package turns bytecode writing back on (tests/__init__.py) before pytest imports
those plugins. pytest rewrites the asserts of every module of a distribution that installs a
plugin (anyio's, hypothesis's, xdist's, pytest_httpx's: about 45 modules at start), and with
``PYTHONDONTWRITEBYTECODE`` set none of that was cached: each process of every run rewrote
them again (0.7 s of CPU a process, four processes a run)."""
