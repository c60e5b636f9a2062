"""A package's public names imported on first use (PEP 562): the package lists each name
with the module it lives in, and a name's module is imported when the name is first read, so
importing the package loads none of them (docs/engine.md, "Layers")."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__`` over ``exports`` (name -> module); a
    name read once is kept in ``namespace`` (the package's globals), so it is looked up once."""

    def load(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        """``dir()`` of the package: its public names and the submodules imported so far
        (not what its own code imports, such as ``Any``)."""
        shown = {
            name
            for name, value in namespace.items()
            if name.startswith("__")
            or (getattr(value, "__name__", None) == f"{package}.{name}" and name[0] != "_")
        }
        return sorted(shown | set(exports))

    return load, names
