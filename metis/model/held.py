"""What a message's blocks hold in dicts and lists, copied when a value derived from the
messages is kept, and compared when it is found again.

A block is frozen, but the containers its fields hold are not: a tool call's ``input``, a tool
result's content list, a ``ProviderRaw`` payload, a text's citations can be changed in place
(``block.input["x"] = 2``) while the message holds the very same block. A value derived before
the change (a wire form, a history's record) must not be given after it, so whoever keeps one
keeps a :func:`snapshot` of the blocks with it, and gives it again only while
:func:`unchanged` says so.

The snapshot notes which blocks hold a container at all: a block is frozen, so one that holds
none (a text without citations or payload, the common case) never will, and is not read
again. Only the fields that can hold a container are read (found once per class from its
annotations). Data is copied deep (through pickle, in C); the canonical objects in a list (a
tool result's parts, citations) are kept as they are and their own containers taken too, so
comparing is one ``==`` in C for the data and an identity check for the objects. One snapshot
of a message serves all that keep a value of it (:func:`of_message`). What cannot be copied
makes the message unkeepable; what does not compare equal to its copy (an object of the
application's without ``__eq__``) makes it miss every time.
"""

from __future__ import annotations

import pickle
import types
import typing
import weakref
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from pydantic import BaseModel

K = TypeVar("K")
_FIELDS: dict[type, tuple[str, ...]] = {}
_CONTAINERS = (dict, list, set, tuple, typing.Any)


class Unkeepable(Exception):
    """What a block holds cannot be copied: a value derived from its message is not kept."""


class Held:
    """Where the blocks that hold containers are (message, block), and copies of them."""

    __slots__ = ("at", "copies")

    def __init__(self, at: tuple[tuple[int, int], ...], copies: tuple[Any, ...]) -> None:
        self.at, self.copies = at, copies


NOTHING = Held((), ())
"""The snapshot of blocks that hold no container."""
LIMIT = 4096
"""The most messages whose snapshot is kept (the oldest go first)."""
_BY_MESSAGE: dict[int, tuple[weakref.ref[Any], tuple[Any, ...], Held]] = {}


def snapshot(contents: Sequence[Sequence[Any]]) -> Held:
    """What the blocks of each content list in ``contents`` hold now, copied;
    :class:`Unkeepable` when something they hold cannot be copied."""
    at: list[tuple[int, int]] = []
    live: list[Any] = []
    for i, blocks in enumerate(contents):
        for j, block in enumerate(blocks):
            count = len(live)
            _collect(block, live)
            if len(live) > count:
                at.append((i, j))
    if not live:
        return NOTHING
    try:
        return Held(tuple(at), tuple(map(_copy, live)))
    except Exception as exc:  # a tool input holding an object of the application's
        raise Unkeepable(str(exc)) from None


def of_message(message: Any) -> Held:
    """The :func:`snapshot` of ``message``'s blocks, shared by everything that keeps a value
    derived from it (its facts, its wire forms, its history's record): taken once, and again
    only when what it holds changed. :class:`Unkeepable` as :func:`snapshot`."""
    at, content = id(message), message.content
    entry = _BY_MESSAGE.get(at)
    if (
        entry is not None
        and entry[0]() is message
        and entry[1] == tuple(content)
        and unchanged(entry[2], (content,))
    ):
        return entry[2]
    kept = snapshot((content,))
    if kept.at:  # a message that holds no container needs no entry
        if len(_BY_MESSAGE) >= LIMIT:
            with suppress(KeyError, RuntimeError, StopIteration):  # another thread was first
                del _BY_MESSAGE[next(iter(_BY_MESSAGE))]
        _BY_MESSAGE[at] = (weakref.ref(message, forgetting(_BY_MESSAGE, at)), tuple(content), kept)
    return kept


def joined(parts: Iterable[Held]) -> Held:
    """The snapshots of several messages' blocks (:func:`of_message`) as one of the list of
    their content lists, in order: nothing is copied again."""
    at: list[tuple[int, int]] = []
    copies: list[Any] = []
    for i, part in enumerate(parts):
        if part.at:
            at += [(i, j) for _, j in part.at]
            copies += part.copies
    return Held(tuple(at), tuple(copies)) if at else NOTHING


def forgetting(entries: dict[K, Any], at: K) -> Callable[[Any], None]:
    """What drops the entry at ``at`` of ``entries`` (its first item the weak reference to a
    message) once that message is gone: nothing derived from it is held past it."""

    def forget(ref: Any) -> None:
        entry = entries.get(at)
        if entry is not None and entry[0] is ref:
            with suppress(KeyError):
                del entries[at]

    return forget


def unchanged(kept: Held, contents: Sequence[Sequence[Any]]) -> bool:
    """Whether the blocks of ``contents`` hold what they held when ``kept`` was taken. The
    caller has checked that the content lists hold the same blocks (or equal ones) in the
    same places."""
    if not kept.at:
        return True
    live: list[Any] = []
    for i, j in kept.at:
        _collect(contents[i][j], live)
    try:
        return bool(kept.copies == tuple(live))
    except Exception:  # a value whose comparison fails is taken as changed
        return False


def _collect(obj: Any, found: list[Any]) -> None:
    names = _FIELDS.get(obj.__class__)
    if names is None:
        names = _container_fields(obj.__class__)
    fields = obj.__dict__
    for name in names:
        value = fields[name]
        cls = value.__class__
        if value is None or cls is str:
            continue
        if cls is dict:
            found.append(value)
        elif cls is list:
            found.append(value)
            for item in value:
                if item.__class__ in _FIELDS or isinstance(item, BaseModel):
                    _collect(item, found)
        elif isinstance(value, BaseModel):
            _collect(value, found)
        elif isinstance(value, dict | list | set | tuple):
            found.append(value)


def _copy(value: Any) -> Any:
    """A deep copy of the data (through pickle, in C: several times faster than
    ``copy.deepcopy``); the canonical objects in a list kept as they are (their own
    containers are taken apart)."""
    if value.__class__ is list and any(isinstance(item, BaseModel) for item in value):
        return [item if isinstance(item, BaseModel) else _copy(item) for item in value]
    return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


def _container_fields(cls: type, seen: frozenset[type] = frozenset()) -> tuple[str, ...]:
    """The fields of ``cls`` that can hold a dict or a list, there or deeper."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return ()
    seen |= {cls}
    fields = cls.model_fields.items()
    names = tuple(name for name, info in fields if _may_hold(info.annotation, seen))
    if not seen - {cls}:  # the class itself, not a step of another's reading
        _FIELDS[cls] = names
    return names


def _may_hold(annotation: Any, seen: frozenset[type]) -> bool:
    if annotation in _CONTAINERS:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _may_hold(args[0], seen)
    if origin in (typing.Union, types.UnionType):
        return any(_may_hold(arg, seen) for arg in args)
    if origin is not None:
        return origin in _CONTAINERS
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:  # a model that holds itself: taken as holding containers
            return True
        return bool(_FIELDS.get(annotation) or _container_fields(annotation, seen))
    return False
