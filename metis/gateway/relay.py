"""The pass-through path's byte relays (docs/gateway.md "Pass-through"): a provider's answer
in its own API, handed to a caller of that same API with only what the gateway owns changed:
the model named as the caller named it, thinking signed with its maker, and the usage read on
the way (for the key's budget and the metrics). Every other byte goes through as it came.

A stream is cut at event boundaries (its line ends made LF); a run of events with nothing to
change is passed on as one piece, unparsed, and of a run with something to change only the
events that hold a marker of it are parsed. An event is held until its blank line comes, up to
:data:`~metis.wire.framing.sse.MAX_EVENT_LENGTH` bytes: past that, a ``ProtocolError``.
Sans-IO: bytes in, bytes out.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from metis.errors import ErrorClass, ProtocolError
from metis.gateway.json_text import utf8
from metis.gateway.provenance import wrap
from metis.gateway.sse import data, dumps, event
from metis.model.content import ProviderRaw
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.wire.anthropic.read import stop_reason as anthropic_stop
from metis.wire.anthropic.usage import UsageTally
from metis.wire.builder import MessageBuilder
from metis.wire.framing.sse import MAX_EVENT_LENGTH
from metis.wire.json_limits import loads
from metis.wire.openai_chat.read import read_usage as read_chat_usage
from metis.wire.openai_chat.read import stop_reason as chat_stop

_MODEL = re.compile(rb'"model": ?"(?:[^"\\]|\\.)*"')
"""A JSON object's ``model`` member. Within a JSON string every quote is escaped, so this
finds only a member, never text that reads like one."""


class AnthropicUsage:
    """Messages API usage as the translated path reads it (metis/wire/anthropic/usage.py): the
    top-level counts named so far (``message_start``'s, then ``message_delta``'s over them),
    the compaction passes ``usage.iterations`` lists apart added, the thinking tokens of
    ``output_tokens_details`` the reasoning part; counts that are not counts read as none."""

    def __init__(self) -> None:
        self._builder = MessageBuilder("pass-through", "")
        self._tally = UsageTally(self._builder)

    def read(self, raw: Any) -> TokenUsage:
        """The usage so far, with ``raw`` (a stream event's usage) added; one that is not
        usage read as none."""
        with contextlib.suppress(ProtocolError):
            self._tally.read(raw if isinstance(raw, dict) else None)
        return self._builder.token_usage()


def read_as_translated(read: Callable[[MessageBuilder, Any], None], raw: Any) -> TokenUsage:
    """``raw`` usage, read by ``read`` (the API's codec's own reader: the counts the
    translated path takes of it); counts that are not counts read as none, the answer relayed
    on as it came."""
    builder = MessageBuilder("pass-through", "")
    try:
        read(builder, raw if isinstance(raw, dict) else {})
    except ProtocolError:
        return TokenUsage()
    return builder.token_usage()


def chat_usage(raw: Any, tier: Any = None) -> TokenUsage:
    """Chat Completions usage, as the translated path reads it (cache hits and writes as
    each compatible server names them, reasoning counted apart where the totals show it),
    with the ``service_tier`` beside it."""
    return read_as_translated(
        lambda builder, usage: read_chat_usage(builder, usage, False, tier), raw
    )


STREAM_ERROR_CLASSES = {
    "overloaded_error": ErrorClass.OVERLOADED,
    "rate_limit_error": ErrorClass.RATE_LIMIT,
    "rate_limit_exceeded": ErrorClass.RATE_LIMIT,
    "insufficient_quota": ErrorClass.RATE_LIMIT,
    "billing_error": ErrorClass.RATE_LIMIT,
    "authentication_error": ErrorClass.AUTH,
    "permission_error": ErrorClass.AUTH,
    "invalid_request_error": ErrorClass.INVALID_REQUEST,
    "context_length_exceeded": ErrorClass.CONTEXT_OVERFLOW,
    "api_error": ErrorClass.SERVER_ERROR,
    "server_error": ErrorClass.SERVER_ERROR,
    "timeout_error": ErrorClass.SERVER_ERROR,
    "timeout": ErrorClass.SERVER_ERROR,
}
"""The error types and codes a provider's in-stream error event names (Anthropic's ``type``,
OpenAI's ``code`` or ``type``) -> their class, as the metrics count them."""


def _error_type(obj: Any) -> str:
    """The class of an in-stream error event's ``error`` (its code first, then its type;
    ``other`` when neither is known)."""
    error = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(error, dict):
        error = obj if isinstance(obj, dict) else {}
    for field in ("code", "type"):
        found = STREAM_ERROR_CLASSES.get(str(error.get(field)))
        if found is not None:
            return found.value
    return ErrorClass.OTHER.value


class Relay:
    """One answer relayed: ``feed`` each chunk of a stream (then ``end``), or ``whole`` for a
    whole body. ``usage`` and ``stop`` are what the provider reported so far; ``failed`` the
    type of an error event it sent in the stream (None: none)."""

    markers: tuple[bytes, ...] = ()
    """Bytes only the events the relay must read hold: any other event goes through as it
    came, unparsed."""
    _marked: Callable[[bytes], object] = staticmethod(lambda ready: None)

    def __init_subclass__(cls, **settings: Any) -> None:
        super().__init_subclass__(**settings)
        if cls.markers:  # one search for them all, cheaper than one for each
            cls._marked = re.compile(b"|".join(map(re.escape, cls.markers))).search

    def __init__(self, model: str) -> None:
        self.model = model
        self.usage: TokenUsage | None = None
        self.stop: StopReason | None = None
        self.failed: str | None = None
        self._held: list[bytes] = []  # the start of an event not yet ended
        self._size = 0  # its length
        self._skip_lf = False  # the last chunk ended in CR: a LF opening the next is its pair

    @property
    def finished(self) -> bool:
        """Whether the provider said how the answer ended (its stop, or an error event): a
        stream that ends without it was cut short."""
        return self.stop is not None or self.failed is not None

    def feed(self, chunk: bytes) -> bytes:
        if self._skip_lf:  # the chunk before ended in CR: a LF opening this one is its pair
            self._skip_lf = False
            chunk = chunk[1:] if chunk[:1] == b"\n" else chunk
        if b"\r" in chunk:
            self._skip_lf = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        cut = chunk.rfind(b"\n\n") + 2
        if cut < 2:  # no blank line in the chunk; one may straddle the two
            cut = 1 if self._held and self._held[-1][-1:] == b"\n" and chunk[:1] == b"\n" else 0
        if not cut:
            self._hold(chunk)
            return b""
        if self._held:
            ready = b"".join([*self._held, chunk[:cut]])
            self._held.clear()
            self._size = 0
        else:
            ready = chunk[:cut]
        if cut < len(chunk):
            self._hold(chunk[cut:])
        return self._pass(ready)

    def _hold(self, piece: bytes) -> None:
        """Keeps ``piece`` of an event not yet ended; an event too long to hold is refused."""
        if piece:
            self._held.append(piece)
            self._size += len(piece)
        if self._size > MAX_EVENT_LENGTH:
            self._held.clear()
            limit = MAX_EVENT_LENGTH >> 20
            raise ProtocolError(f"provider sent an event longer than {limit} MiB without its end")

    def end(self) -> bytes:
        """What is left when the stream ends: an event without its blank line, when it is
        whole (its data JSON, or ``[DONE]``). One cut in its middle is left out: relayed, it
        was a JSON error in the caller's SDK, before the error event that says the stream
        was cut."""
        held = b"".join(self._held).rstrip(b"\n")
        self._held.clear()
        self._size, self._skip_lf = 0, False
        if not held.strip() or (_fields(held)[1] is None and not held.endswith(b"[DONE]")):
            return b""
        return self._pass(held + b"\n\n")

    def _pass(self, ready: bytes) -> bytes:
        marked = self._marked
        if not marked(ready):
            return ready
        out = []
        for raw in ready.split(b"\n\n"):
            if raw.strip():
                out.append(self.rewrite(raw) if marked(raw) else raw + b"\n\n")
        return b"".join(out)

    def rewrite(self, raw: bytes) -> bytes:
        raise NotImplementedError

    def whole(self, body: bytes) -> bytes:
        """A whole answer's body, relayed."""
        raise NotImplementedError


def _fields(raw: bytes) -> tuple[str, Any]:
    """An SSE event's name and its data, parsed (None when it is not JSON)."""
    name, lines = "", []
    for line in raw.split(b"\n"):
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            lines.append(line[5:].lstrip(b" "))
    try:
        return name, loads(b"\n".join(lines))
    except (ValueError, RecursionError):
        return name, None


class AnthropicRelay(Relay):
    """A Messages API answer; ``made_by`` signs the thinking as the translated path does."""

    markers = (
        b"event: message_start",
        b"event: message_delta",
        b"event: error",
        b"signature_delta",
        b"redacted_thinking",
    )

    def __init__(self, model: str, made_by: ProviderRaw) -> None:
        super().__init__(model)
        self.made_by = made_by
        self._usage = AnthropicUsage()

    def rewrite(self, raw: bytes) -> bytes:
        name, obj = _fields(raw)
        if not isinstance(obj, dict):
            return raw + b"\n\n"
        if name == "message_start" and isinstance(obj.get("message"), dict):
            obj["message"]["model"] = self.model
            self.usage = self._usage.read(obj["message"].get("usage"))
        elif name == "message_delta":
            self.usage = self._usage.read(obj.get("usage"))
            self._stopped((obj.get("delta") or {}).get("stop_reason"))
        elif name == "error":
            self.failed = _error_type(obj)
        elif name == "content_block_start" and isinstance(obj.get("content_block"), dict):
            self._sign(obj["content_block"])
        elif name == "content_block_delta" and isinstance(obj.get("delta"), dict):
            self._sign(obj["delta"])
        else:
            return raw + b"\n\n"
        return event(name, obj)

    def _stopped(self, raw: Any) -> None:
        if isinstance(raw, str):
            self.stop = anthropic_stop(raw)

    def _sign(self, part: dict[str, Any]) -> None:
        for key in ("signature", "data"):
            if isinstance(part.get(key), str) and part.get("type") in (
                "thinking",
                "redacted_thinking",
                "signature_delta",
            ):
                part[key] = wrap(self.made_by, part[key])

    def whole(self, body: bytes) -> bytes:
        obj = loads(body)
        if not isinstance(obj, dict):
            return body
        obj["model"] = self.model
        self.usage = self._usage.read(obj.get("usage"))
        self._stopped(obj.get("stop_reason"))
        for block in obj.get("content") or ():
            if isinstance(block, dict):
                self._sign(block)
        return utf8(dumps(obj))


_CALLS = (b'"tool_calls":[{', b'"tool_calls": [{')
_REFUSAL = (b'"refusal":"', b'"refusal": "')


def _searches(base: tuple[bytes, ...]) -> dict[tuple[bool, bool], Callable[[bytes], object]]:
    """(tool calls seen, refusal seen) -> one search for ``base`` and the markers of what
    the stream has not shown yet: once seen, no later chunk of it is parsed for it."""
    found: dict[tuple[bool, bool], Callable[[bytes], object]] = {}
    for calls in (False, True):
        for refused in (False, True):
            marks = (*base, *(() if calls else _CALLS), *(() if refused else _REFUSAL))
            found[calls, refused] = re.compile(b"|".join(map(re.escape, marks))).search
    return found


class ChatRelay(Relay):
    """A Chat Completions answer. The gateway asks a stream for its usage chunk; a caller that
    did not ask for it (``include_usage``) does not get it. Its stop is read as the translated
    path reads it: ``stop`` with tool calls is ``tool_use``, with a refusal ``refusal``; a
    stream's first tool call and first refusal are the only chunks of them parsed."""

    markers = (
        b'"usage":{',
        b'"usage": {',
        b'"error"',
        b'"finish_reason":"',
        b'"finish_reason": "',
        b"[DONE]",
    )
    _SEARCHES = _searches(markers)

    def __init__(self, model: str, include_usage: bool) -> None:
        super().__init__(model)
        self.include_usage = include_usage
        named = b'"model":' + dumps(model).encode()
        self._named = named.replace(b"\\", b"\\\\")
        self._calls = self._refused = False
        self._marked = self._SEARCHES[False, False]

    def _pass(self, ready: bytes) -> bytes:
        return super()._pass(_MODEL.sub(self._named, ready))

    def _saw(self, part: Any) -> None:
        """A message's or a delta's tool calls and refusal, noted."""
        if not isinstance(part, dict):
            return
        calls = part.get("tool_calls")
        self._calls = self._calls or (isinstance(calls, list) and bool(calls))
        refusal = part.get("refusal")
        self._refused = self._refused or (isinstance(refusal, str) and bool(refusal))
        self._marked = self._SEARCHES[self._calls, self._refused]

    def _stopped(self, obj: dict[str, Any], part: str) -> None:
        choices = obj.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(first, dict):
            return
        self._saw(first.get(part))
        raw = first.get("finish_reason")
        if not isinstance(raw, str):
            raw = None  # a whole body ends without one as the translated path reads it
            if part == "delta":
                return
        self.stop = chat_stop(raw, self._refused, self._calls or raw == "tool_calls")

    def _done(self) -> None:
        """``[DONE]``: the server says the reply is whole. One that never named a
        ``finish_reason`` ended as the translated path ends it (the Chat codec's
        ``end_marked``): by its tool calls, or as a turn's end."""
        if self.stop is None and self.failed is None:
            self.stop = StopReason(kind=StopKind.TOOL_USE if self._calls else StopKind.END_TURN)

    def rewrite(self, raw: bytes) -> bytes:
        if raw.rstrip().endswith(b"[DONE]") and raw.split(b"data:")[-1].strip() == b"[DONE]":
            self._done()
            return raw + b"\n\n"
        _, obj = _fields(raw)
        if isinstance(obj, dict):
            self._stopped(obj, "delta")
        if isinstance(obj, dict) and "error" in obj and "choices" not in obj:
            self.failed = _error_type(obj)
        elif isinstance(obj, dict) and isinstance(obj.get("usage"), dict):
            self.usage = chat_usage(obj["usage"], obj.get("service_tier"))
            if not self.include_usage:
                if obj.get("choices"):  # a usage chunk that also carries a choice
                    return data({**obj, "usage": None})
                return b""
        return raw + b"\n\n"

    def whole(self, body: bytes) -> bytes:
        obj = loads(body)
        if not isinstance(obj, dict):
            return body
        obj["model"] = self.model
        self.usage = chat_usage(obj.get("usage"), obj.get("service_tier"))
        self._stopped(obj, "message")
        return utf8(dumps(obj))
