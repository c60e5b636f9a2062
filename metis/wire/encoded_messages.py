"""The wire form of one history message, kept for the next call of the conversation.

An encoder that makes each message's wire form from that message alone (and from who is
called) keeps it in a :class:`~metis.model.memo.MessageMemo` through :func:`encoded`: the next
call that sends the same message object to the same provider and model reuses it; the wire
form of the whole history is kept on the history's record too (:func:`encoded_history`), so a
call that sends the same messages again reads them in one look-up. A message (or history)
whose encoding reported a drop is made again on every call, so each call's result lists its
own drops. The kept dicts are shared by the bodies of later calls: the encoder copies the
lists it extends, and a wire edit copies what it changes (docs/stages.md). An adapter whose
stack has an application's own stage after ``encode`` encodes inside :func:`made_fresh`, so
that stage's body is never shared: nothing it changes can reach another call (its tools'
schemas included: :func:`sent_schema`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from metis.model.content import Message, ProviderRaw
from metis.model.history import History, history_in
from metis.model.memo import MessageMemo
from metis.wire.codec import EncodeContext
from metis.wire.json_limits import json_copy

V = TypeVar("V")


class _Watched:
    """The call, as an encoder sees it, telling whether a drop was reported through it."""

    __slots__ = ("call", "dropped")

    def __init__(self, call: EncodeContext) -> None:
        self.call, self.dropped = call, False

    @property
    def request_id(self) -> str:
        return self.call.request_id

    @property
    def provider(self) -> str:
        return self.call.provider

    @property
    def model(self) -> str:
        return self.call.model

    @property
    def wire_model(self) -> str:
        return self.call.wire_model

    def produced(self, origin: ProviderRaw | None) -> bool:
        return self.call.produced(origin)

    def history(self, messages: Sequence[Message]) -> History:
        return history_in(self.call, messages)

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        self.dropped = True
        self.call.warn_dropped(block_type, reason, message_id, **extra)


def encoded(
    memo: MessageMemo[V],
    message: Message,
    key: Hashable,
    call: EncodeContext,
    encode: Callable[[EncodeContext], V],
) -> V:
    """``encode(call)`` of ``message``, kept under ``key`` with the provider and model when it
    reported no drop. ``key`` names everything else the wire form depends on."""
    if _FRESH.get():
        return encode(call)
    key = (call.provider, call.wire_model, key)
    value = memo.get(message, key)
    if value is not None:
        return value
    watched = _Watched(call)
    value = encode(watched)
    return value if watched.dropped else memo.put(message, key, value)


def encoded_history(
    messages: Sequence[Message],
    key: Hashable,
    call: EncodeContext,
    encode: Callable[[EncodeContext], V],
) -> V:
    """``encode(call)`` of a whole history, kept on its record
    (:func:`metis.model.history.history_of`) under ``key`` with the provider and model when it
    reported no drop: the next call that sends the same messages finds it in one look-up.
    ``key`` names everything else the wire form depends on."""
    if _FRESH.get():
        return encode(call)
    history = history_in(call, messages)
    key = ("wire", call.provider, call.model, call.wire_model, key)
    value: V | None = history.found(key)
    if value is not None:
        return value
    watched = _Watched(call)
    value = encode(watched)
    if not watched.dropped:
        history.keep(key, value)
    return value


_FRESH: ContextVar[bool] = ContextVar("metis_fresh_wire", default=False)


@contextmanager
def made_fresh() -> Iterator[None]:
    """Within it, :func:`encoded` makes every message's wire form anew and keeps none, and
    :func:`sent_schema` copies each tool's schema."""
    token = _FRESH.set(True)
    try:
        yield
    finally:
        _FRESH.reset(token)


def sent_schema(schema: Any) -> Any:
    """A tool's schema as its body holds it: the very object (shared by every call that sends
    it, as no built-in step changes it in place: metis/model/schema_forms.py), or a copy of
    it within :func:`made_fresh`, for a stage of the application's that may."""
    return json_copy(schema) if _FRESH.get() else schema
