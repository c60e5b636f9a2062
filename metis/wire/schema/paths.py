"""Dot paths and templates: the read side and the write side of the schema-driven codec.

A *path* names a place in a provider's JSON: ``candidates.0.content.parts`` (docs/stacks.md
``_resolve_path``): a key in an object, a whole number an index in a list (``-1`` the last),
``*`` every item of a list (or every value of an object). Paths are compiled once, when the
stack is loaded, into tuples that :func:`resolve` walks with no string work, so reading a
streamed chunk costs a few dict lookups.

A *template* is the shape of a JSON value with ``{placeholders}`` (docs/stacks.md
``block_template``). A string that is exactly ``"{name}"`` becomes the value itself (an object,
a list, a number); a string with a placeholder inside other text is formatted. Placeholders
whose value is ``None`` remove their key (or list item), and an object or list left empty that
way is removed too, so optional fields need no conditionals. ``{"$if": name, "$then": value}``
is ``value`` when ``name`` is set (not ``None``, ``False`` or empty) and absent otherwise.
Templates are compiled once; a placeholder the context does not define fails at stack load.
"""

from __future__ import annotations

import copy
import re
import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from metis.core.digits import ascii_digits
from metis.errors import StackError

Step = str | int
Path = tuple[Step, ...]
WILDCARD = "*"


def _is_index(part: str) -> bool:
    digits = part.removeprefix("-")
    return ascii_digits(digits)


def compile_path(path: str) -> Path:
    if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
        raise StackError(f"schema path {path!r} is not a dot path like 'a.0.b'")
    return tuple(int(part) if _is_index(part) else part for part in path.split("."))


def resolve(obj: Any, path: Path) -> Any:
    """The value at ``path`` in ``obj``, or ``None`` when any step is missing. A ``*`` step
    makes the answer the list of every match (possibly empty)."""
    for i, step in enumerate(path):
        if obj.__class__ is dict:
            if step == WILDCARD:
                return _every(obj, path[i + 1 :])
            obj = obj.get(step if step.__class__ is str else str(step))
        elif obj.__class__ is list:
            if step.__class__ is int:
                if not -len(obj) <= step < len(obj):
                    return None
                obj = obj[step]
            elif step == WILDCARD:
                return _every(obj, path[i + 1 :])
            else:
                return None
        else:
            return [] if WILDCARD in path[i:] else None
    return obj


def _every(obj: Any, rest: Path) -> list[Any]:
    items: Iterable[Any]
    if isinstance(obj, list):
        items = obj
    elif isinstance(obj, dict):
        items = obj.values()
    else:
        return []
    found: list[Any] = []
    for item in items:
        value = resolve(item, rest)
        if isinstance(value, list) and WILDCARD in rest:
            found.extend(value)
        elif value is not None:
            found.append(value)
    return found


Getter = Callable[[Any], Any]


def getter(path: Path) -> Getter:
    """:func:`resolve` for one path, specialised once: a path of keys, the common case on the
    hot path, is a loop of ``dict.get`` (one call for a single key)."""
    if WILDCARD in path:
        return lambda obj: resolve(obj, path)
    if len(path) == 2 and isinstance(path[0], str):
        return _two_steps(path[0], path[1])
    if not all(step.__class__ is str for step in path):
        pairs = tuple((str(step), step if step.__class__ is int else None) for step in path)

        def steps(obj: Any) -> Any:
            for key, index in pairs:
                cls = obj.__class__
                if cls is dict:
                    obj = obj.get(key)
                elif cls is list and index is not None:
                    try:
                        obj = obj[index]
                    except IndexError:
                        return None
                else:
                    return None
            return obj

        return steps
    if len(path) == 1:
        (key,) = path

        def one(obj: Any) -> Any:
            return obj.get(key) if obj.__class__ is dict else None

        return one

    def keys(obj: Any) -> Any:
        for key in path:
            if obj.__class__ is not dict:
                return None
            obj = obj.get(key)
        return obj

    return keys


def _two_steps(outer: str, inner: Step) -> Getter:
    """A getter for a path of two steps, unrolled: the envelope of a chunk (``candidates.0``)
    and most content paths (``content.parts``) are read once per streamed object."""
    outer_key = outer
    if inner.__class__ is int:
        index, inner_key = inner, str(inner)

        def key_index(obj: Any) -> Any:
            if obj.__class__ is not dict:
                return None
            obj = obj.get(outer_key)
            cls = obj.__class__
            if cls is list:
                try:
                    return obj[index]
                except IndexError:
                    return None
            return obj.get(inner_key) if cls is dict else None

        return key_index
    second = str(inner)

    def two_keys(obj: Any) -> Any:
        if obj.__class__ is not dict:
            return None
        obj = obj.get(outer_key)
        return obj.get(second) if obj.__class__ is dict else None

    return two_keys


def first(obj: Any, path: Path) -> Any:
    """Like :func:`resolve`, but a wildcard path answers its first match (or ``None``)."""
    value = resolve(obj, path)
    if WILDCARD in path:
        return value[0] if value else None
    return value


def set_path(target: dict[str, Any], path: Path, value: Any) -> None:
    """Write ``value`` at ``path``, making the objects on the way (keys only, no indices)."""
    for step in path[:-1]:
        nested = target.get(str(step))
        if not isinstance(nested, dict):
            nested = target[str(step)] = {}
        target = nested
    target[str(path[-1])] = value


# Templates -----------------------------------------------------------------------------------

OMIT: Any = object()
"""What a template renders to when it has nothing to say (its key is left out)."""

_PLACEHOLDER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_FORMATTER = string.Formatter()


class _Var:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Format:
    __slots__ = ("names", "text")

    def __init__(self, text: str, names: list[str]) -> None:
        self.text = text
        self.names = names


class _If:
    __slots__ = ("name", "then")

    def __init__(self, name: str, then: Any) -> None:
        self.name = name
        self.then = then


class Template:
    """A compiled template; :meth:`render` fills it from a mapping of values."""

    __slots__ = ("_root", "names", "source")

    def __init__(self, source: Any, allowed: Iterable[str], where: str) -> None:
        self.source = source
        self.names: set[str] = set()
        self._root = self._compile(source, set(allowed), where)

    def uses(self, name: str) -> bool:
        return name in self.names

    def render(self, values: Mapping[str, Any]) -> Any:
        return _render(self._root, values)

    def _compile(self, node: Any, allowed: set[str], where: str) -> Any:
        if isinstance(node, dict):
            if "$if" in node:
                if set(node) != {"$if", "$then"} or not isinstance(node["$if"], str):
                    raise StackError(f"{where}: a conditional is {{$if: name, $then: value}}")
                self._check(node["$if"], allowed, where)
                return _If(node["$if"], self._compile(node["$then"], allowed, where))
            return {str(k): self._compile(v, allowed, f"{where}.{k}") for k, v in node.items()}
        if isinstance(node, list):
            return [self._compile(v, allowed, f"{where}[{i}]") for i, v in enumerate(node)]
        if isinstance(node, str) and "{" in node:
            whole = _PLACEHOLDER.match(node)
            if whole:
                self._check(whole.group(1), allowed, where)
                return _Var(whole.group(1))
            try:
                names = [name for _, name, _, _ in _FORMATTER.parse(node) if name is not None]
            except ValueError as exc:
                raise StackError(f"{where}: bad template text {node!r}: {exc}") from None
            for name in names:
                self._check(name, allowed, where)
            return _Format(node, names)
        return node

    def _check(self, name: str, allowed: set[str], where: str) -> None:
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise StackError(
                f"{where}: unknown placeholder {{{name}}} (this template has: {known})"
            )
        self.names.add(name)


def _render(node: Any, values: Mapping[str, Any]) -> Any:
    cls = node.__class__
    if cls is _Var:
        value = values.get(node.name)
        if value is None:
            return OMIT
        return copy.deepcopy(value) if isinstance(value, dict | list) else value
    if cls is dict:
        out: dict[str, Any] = {}
        for key, child in node.items():
            value = _render(child, values)
            if value is not OMIT:
                out[key] = value
        return out if out or not node else OMIT
    if cls is list:
        items = [v for v in (_render(child, values) for child in node) if v is not OMIT]
        return items if items or not node else OMIT
    if cls is _Format:
        if any(values.get(name) is None for name in node.names):
            return OMIT
        return node.text.format_map(values)
    if cls is _If:
        return _render(node.then, values) if values.get(node.name) else OMIT
    return node


def compile_template(source: Any, allowed: Iterable[str], where: str) -> Template | None:
    return None if source is None else Template(source, allowed, where)


# Durations -----------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def seconds(value: Any) -> float | None:
    """A delay as a provider wrote it: ``17``, ``"17"``, ``"17s"``, ``"1.5s"``, ``"250ms"``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNIT[match.group(2)]
    return None
