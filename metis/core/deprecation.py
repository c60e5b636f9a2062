"""Names kept for one release after a rename: each warns once per process when used."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

Getattr: TypeAlias = Callable[[str], Any]

_warned: set[str] = set()


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """One DeprecationWarning per process for ``old``, saying to use ``new`` instead. The
    ``stacklevel`` default points at the caller of the function that calls this."""
    if old in _warned:
        return
    _warned.add(old)
    message = f"{old} is deprecated and goes in the next release: use {new}"
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)


def renamed(module: str, names: Mapping[str, str], namespace: Mapping[str, Any]) -> Getattr:
    """A module ``__getattr__`` that gives each old name of ``names`` (old -> new) the object
    ``namespace`` holds under the new one, warning once that the old name is deprecated."""

    def __getattr__(name: str) -> Any:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_deprecated(f"{module}.{name}", f"{module}.{new}")
        return namespace[new]

    return __getattr__
