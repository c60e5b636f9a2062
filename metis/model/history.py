"""What the request steps ask of a whole history, read once and kept for the next call.

A request step that looks for something in the history (media to fit, tool ids to map,
reasoning to filter, blank text, cache hints, a compaction block) asks :func:`history_of` for
the :class:`History` of its request's messages: one record of every message's facts
(:mod:`metis.model.facts`), with where each kind of thing is, so a step that finds nothing to
do returns at once and one that does walks only the messages that hold it. A step may keep
what it derives from the whole history on the record (:meth:`History.kept`): the next step or
the next call that sends the same history finds it there.

A record is found by the list's identity, or by its messages' identities (the next call of a
conversation builds a new list of the same messages), and given only while it still describes
the list: the very message objects, alive, each holding the blocks it held (the same objects,
or equal ones), each block holding in its dicts and lists what it held (:mod:`metis.model.held`).
So a list whose messages were replaced, reordered, added or removed, or whose message's content
was changed in place (a block's tool input, result content, payload or citations too), never
finds an old record; a history holding what cannot be copied finds none. A record goes when one of
its messages goes, and at most ``LIMIT`` are kept (the oldest go first).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from contextlib import suppress
from operator import attrgetter, call, is_
from typing import Any, TypeVar

from metis.model.content import ContentBlock, ImageBlock, Message, Role
from metis.model.facts import MessageFacts, facts_of
from metis.model.held import Held, Unkeepable, joined, of_message, unchanged

V = TypeVar("V")
LIMIT = 256
"""The most records kept (the oldest go first)."""
KEPT_LIMIT = 64
"""The most values a record keeps for the steps (past it, they are all dropped)."""
_content = attrgetter("content")


class History:
    """The facts of one list of messages. Each ``*_at`` is the positions of the messages that
    hold that thing, in order (empty when none does); ``system`` and ``assistant``: a message
    of that role is in it."""

    __slots__ = (
        "_contents",
        "_held",
        "_kept",
        "_lists",
        "_refs",
        "assistant",
        "blank_at",
        "cache_hints",
        "facts",
        "files",
        "images",
        "media_at",
        "opaque_at",
        "server_tools_at",
        "system",
        "thinking_at",
        "tool_ids",
        "tools_at",
    )

    def __init__(self, messages: Sequence[Message], facts: Sequence[MessageFacts]) -> None:
        self.facts = tuple(facts)
        media: list[int] = []
        tools: list[int] = []
        opaque: list[int] = []
        thinking: list[int] = []
        server: list[int] = []
        blank: list[int] = []
        images: list[ImageBlock] = []
        ids: list[str] = []
        files, hints = False, 0
        for i, f in enumerate(self.facts):  # one walk: each test below is what it records
            if f.images:
                images += f.images
                media.append(i)
            elif f.files:
                media.append(i)
            files = files or f.files
            if f.tool_ids:
                tools.append(i)
                ids += f.tool_ids
            if f.opaque:
                opaque.append(i)
            if f.thinking:
                thinking.append(i)
            if f.server_tools:
                server.append(i)
            if f.blank:
                blank.append(i)
            hints += f.cache_hints
        self.media_at, self.images, self.files = tuple(media), tuple(images), files
        self.tools_at, self.tool_ids = tuple(tools), frozenset(ids)
        self.opaque_at, self.thinking_at = tuple(opaque), tuple(thinking)
        self.server_tools_at, self.blank_at, self.cache_hints = tuple(server), tuple(blank), hints
        roles = {m.role for m in messages}
        self.system, self.assistant = Role.SYSTEM in roles, Role.ASSISTANT in roles
        self._contents: list[list[ContentBlock]] = [list(m.content) for m in messages]
        self._held: Held | None = None  # None: holds what cannot be copied
        with suppress(Unkeepable):
            self._held = joined(map(of_message, messages))
        self._refs: list[weakref.ref[Message]] = []
        self._kept: dict[Hashable, Any] = {}
        self._lists: set[int] = set()

    def describes(self, messages: Sequence[Message]) -> bool:
        """Whether this is still the record of ``messages``: the same objects, alive, in the
        same order, each holding the blocks it held."""
        refs = self._refs
        return (
            len(messages) == len(refs)
            and all(map(is_, map(call, refs), messages))
            and list(map(_content, messages)) == self._contents
            and _unchanged(self._held, self._contents)
        )

    def found(self, key: Hashable) -> Any:
        """What a step kept on this history under ``key`` (None when nothing)."""
        return self._kept.get(key)

    def intact(self) -> bool:
        """Whether every message of the record is alive and holds the blocks it held."""
        messages = [ref() for ref in self._refs]
        try:
            contents = list(map(_content, messages))
        except AttributeError:  # a message is gone
            return False
        return contents == self._contents and _unchanged(self._held, contents)

    def keep(self, key: Hashable, value: Any) -> None:
        """Keeps ``value`` under ``key``, for a later step or call that sends this history;
        not if a message was changed in place since the record was read (the value may have
        been derived from what it holds now)."""
        if not self.intact():
            return
        kept = self._kept
        if len(kept) >= KEPT_LIMIT:
            kept.clear()
        kept[key] = value

    def kept(self, key: Hashable, make: Callable[[], V]) -> V:
        """What a step derived from this whole history under ``key`` (everything else the
        value depends on: the provider, the model, the options), made on first use."""
        try:
            value: V = self._kept[key]
        except KeyError:
            value = make()
            self.keep(key, value)
        return value


_BY_LIST: dict[int, History] = {}
_BY_MESSAGES: dict[tuple[int, ...], History] = {}


def history_of(messages: Sequence[Message]) -> History:
    """The record of ``messages``: kept from an earlier step or call when it still describes
    them, else read (each message's facts from its own memo) and kept."""
    found = _BY_LIST.get(id(messages))
    if found is not None and found.describes(messages):
        return found
    ids = tuple(map(id, messages))
    found = _BY_MESSAGES.get(ids)
    if found is None or not found.describes(messages):
        found = _record(messages, ids)
    _keep(_BY_LIST, id(messages), found)
    found._lists.add(id(messages))
    return found


def history_in(call: object, messages: Sequence[Message]) -> History:
    """The record of ``messages`` as ``call`` has it (a :class:`~metis.pipeline.Call` looks it
    up once per call), else :func:`history_of`."""
    read = getattr(call, "history", None)
    return history_of(messages) if read is None else read(messages)


def _record(messages: Sequence[Message], ids: tuple[int, ...]) -> History:
    record = History(messages, [facts_of(m) for m in messages])
    forget = _forgetting(ids, record._lists)
    record._refs = [weakref.ref(m, forget) for m in messages]
    _keep(_BY_MESSAGES, ids, record)
    return record


def _keep(table: dict[Any, History], key: Hashable, record: History) -> None:
    if len(table) >= LIMIT:
        with suppress(KeyError, RuntimeError, StopIteration):  # another thread was first
            del table[next(iter(table))]
    table[key] = record


def _forgetting(ids: tuple[int, ...], lists: set[int]) -> Callable[[Any], None]:
    """What drops a record once one of its messages is gone (it holds their blocks: a file's
    data is not held past the conversation that sent it). It holds the record's keys, not
    the record: no reference cycle, so the record is freed at once. It holds the tables
    themselves, not their module's names, which are gone when it runs at interpreter exit."""
    by_messages, by_list = _BY_MESSAGES, _BY_LIST

    def forget(_: Any) -> None:
        try:
            by_messages.pop(ids, None)
            for at in list(lists):
                by_list.pop(at, None)
        except RuntimeError:  # another thread changed ``lists`` meanwhile
            pass

    return forget


def _unchanged(held: Held | None, contents: list[list[ContentBlock]]) -> bool:
    """Whether the blocks hold what they held (False when the history holds what cannot be
    copied)."""
    return held is not None and unchanged(held, contents)


def clear() -> None:
    """Forget every record (tests)."""
    _BY_LIST.clear()
    _BY_MESSAGES.clear()
