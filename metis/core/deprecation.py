"""Names kept for one release after a rename: each warns once per process when used."""

from __future__ import annotations

import warnings

_warned: set[str] = set()


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """One DeprecationWarning per process for ``old``, saying to use ``new`` instead. The
    ``stacklevel`` default points at the caller of the function that calls this."""
    if old in _warned:
        return
    _warned.add(old)
    message = f"{old} is deprecated and goes in the next release: use {new}"
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)
