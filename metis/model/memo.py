"""What a step derives from one canonical message, kept across the calls of a conversation.

A conversation resends the same ``Message`` objects turn after turn (an agent's 40th call sends
39 messages it sent before), so what a request step derives from one (its wire form, the
provider's ids in it, its facts) need not be derived again. A :class:`MessageMemo` finds an
entry by the message's identity and a key of everything else the value depends on (the
provider, the model, the ids it maps to, ...), and gives it only while it is the same message:
a weak reference to it still alive and the very object, and its content the blocks it held
(the same objects, or equal ones), each holding in its dicts and lists what it held
(:mod:`metis.model.held`). Canonical objects are frozen, so a message edited with
``model_copy`` (or built anew) is another object and never finds an entry of the old one; a
content list changed in place misses too, unless what it holds is equal to what it held, and so
does a block whose tool input, result content, payload or citations were changed in place. A
message holding what cannot be copied is not kept. The memo holds at most ``limit`` entries
(the oldest go first); an entry goes with its message.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from contextlib import suppress
from typing import Generic, TypeVar

from metis.model.content import ContentBlock, Message
from metis.model.held import Held, Unkeepable, forgetting, of_message, unchanged

V = TypeVar("V")

_Entry = tuple["weakref.ref[Message]", tuple[ContentBlock, ...], Held, V]


class MessageMemo(Generic[V]):
    """Values derived from one message each, under a key of what else they depend on."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._entries: dict[Hashable, _Entry[V]] = {}

    def get(self, message: Message, key: Hashable) -> V | None:
        """The value kept for this very message under ``key``, or None."""
        entry = self._entries.get(id(message) if key is None else (id(message), key))
        if entry is None or entry[0]() is not message:
            return None
        content = message.content  # the blocks compare by identity first: equal only if changed
        if entry[1] == tuple(content) and unchanged(entry[2], (content,)):
            return entry[3]
        return None

    def put(self, message: Message, key: Hashable, value: V) -> V:
        """Keeps ``value`` for ``message`` under ``key``, and returns it."""
        try:
            held = of_message(message)
        except Unkeepable:
            return value
        entries = self._entries
        if len(entries) >= self.limit:
            with suppress(KeyError, RuntimeError, StopIteration):  # another thread was first
                del entries[next(iter(entries))]
        at = id(message) if key is None else (id(message), key)
        entries[at] = (
            weakref.ref(message, forgetting(entries, at)),
            tuple(message.content),
            held,
            value,
        )
        return value

    def get_or_make(self, message: Message, key: Hashable, make: Callable[[], V]) -> V:
        """The value kept for ``message`` under ``key``, made (and kept) if there is none."""
        value = self.get(message, key)
        return self.put(message, key, make()) if value is None else value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
