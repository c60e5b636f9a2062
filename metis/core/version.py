"""The library's version (the same as pyproject.toml's); ``metis.__version__`` re-exports it."""

VERSION = "0.1.0"
