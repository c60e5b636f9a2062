"""A package's public names imported on first use (PEP 562): the package lists each name
with the module it lives in, and a name's module is imported when the name is first read, so
importing the package loads none of them (docs/engine.md, "Layers")."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from metis.core.deprecation import warn_deprecated
from metis.core.suggest import did_you_mean


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__`` over ``exports`` (name -> module); a
    name read once is kept in ``namespace`` (the package's globals), so it is looked up once.
    A public name it does not have is an AttributeError naming the nearest it has."""

    def load(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            hint = did_you_mean(name, [*exports, *_submodules(package)]) if name[:1] != "_" else ""
            raise AttributeError(f"module {package!r} has no attribute {name!r}{hint}")
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


def package_getattr(
    package: str,
    exports: Mapping[str, str],
    load: Callable[[str], Any],
    moved: Mapping[str, str],
    renamed: Mapping[str, str],
) -> Callable[[str], Any]:
    """A package's ``__getattr__``: ``exports`` by :func:`lazy_exports`' ``load``; a name
    ``moved`` to another module (name -> module) or ``renamed`` (old -> new) still answers,
    with a DeprecationWarning; a subpackage is imported when first read as an attribute
    (``metis.telemetry.set_default_sink(...)`` after ``import metis``)."""

    def attribute(name: str) -> Any:
        if name in moved:
            warn_deprecated(f"{package}.{name}", f"{moved[name]}.{name}")
            return getattr(importlib.import_module(moved[name]), name)
        if name in renamed:
            warn_deprecated(f"{package}.{name}", f"{package}.{renamed[name]}")
            return attribute(renamed[name])
        if name in exports or name[:1] == "_":
            return load(name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise  # the package has the module; a library it needs (an extra) is not installed
        return load(name)

    return attribute


def _submodules(package: str) -> list[str]:
    """The public modules and subpackages of ``package`` (read only for a name it lacks)."""
    import pkgutil
    import sys

    path = getattr(sys.modules.get(package), "__path__", None) or []
    return [info.name for info in pkgutil.iter_modules(path) if info.name[:1] != "_"]
