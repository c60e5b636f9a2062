"""The ``decode`` stage: the provider's response bytes become the JSON objects it sent.

It sits just outside the transport and leaves the request alone. A streamed body is split
into its documents by ``format``: ``sse`` (Server-Sent Events, each event's data one JSON
object; OpenAI's ``[DONE]`` terminator ends it, and events after it are ignored),
``ndjson`` (one object per line) or ``eventstream`` (AWS's binary frames,
metis/wire/framing/aws_eventstream.py). A body that is not streamed, or whose format is ``json``,
is one JSON document, parsed once at the end. Anything that is not a JSON object, and JSON
beyond :mod:`metis.wire.json_limits` (NaN, Infinity, nesting deeper than 100 levels),
raises :class:`~metis.errors.ProtocolError`.

A streamed request answered with a whole JSON body (``content-type: application/json``, as
some proxies and servers do) is read as that one document, yielded as a :class:`WholeBody` so
that ``normalize`` reads it as a complete reply. A stream mislabelled as JSON is still read as
its format says: SSE never opens with ``{``, and NDJSON is one document per line.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict
from pydantic_core import from_json

from metis.errors import ProtocolError, redact
from metis.pipeline.call import Call
from metis.pipeline.request import ResponseHead, ResponseItem, WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.wire import json_limits
from metis.wire.framing.aws_eventstream import EventStreamDecoder, frame_object
from metis.wire.framing.sse import MAX_LINE_LENGTH
from metis.wire.framing.sse_data import SSEDataDecoder
from metis.wire.json_limits import MAX_DEPTH, JSONLimitError

_SNIPPET = 200
log = logging.getLogger("metis")


class WholeBody(dict[str, Any]):
    """A complete reply's JSON body, given where a stream was expected."""

    __slots__ = ()


class Decode(Stage[WireRequest, WireRequest, ResponseItem, dict[str, Any]]):
    name = "decode"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        format: Literal["sse", "ndjson", "json", "eventstream"] = "sse"

    options: Options
    _secrets: tuple[str, ...] = ()

    def bind(self, services: StageServices) -> None:
        self._secrets = services.secrets

    def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, ResponseItem]
    ) -> AsyncIterator[dict[str, Any]]:
        fmt = self.options.format
        if not request.stream or fmt == "json":
            return _whole_body(request, call, inner)
        if fmt == "sse":  # the hot path: its own generator, no frame between it and normalize
            return _sse_objects(request, call, inner, self._secrets)
        return _framed_objects(request, call, inner, fmt)


async def _head(items: AsyncIterator[ResponseItem]) -> tuple[str | None, bytes | None]:
    """The answer's content type (None from a transport that sends no head) and its first
    body bytes (None for an empty body)."""
    first = await anext(items, None)
    if isinstance(first, ResponseHead):
        return first.content_type, cast(bytes | None, await anext(items, None))
    return None, first


async def _whole_body(
    request: WireRequest, call: Call, inner: Inner[WireRequest, ResponseItem]
) -> AsyncIterator[dict[str, Any]]:
    parts = [item async for item in inner(request, call) if not isinstance(item, ResponseHead)]
    yield _parse(_text(b"".join(parts), "json"), "json")


async def _whole_reply(
    first: bytes, chunks: AsyncIterator[bytes], fmt: str
) -> AsyncIterator[dict[str, Any]]:
    """A streamed request answered with ``application/json``: one whole reply, or NDJSON."""
    body = b"".join([first, *[more async for more in chunks]])
    if fmt == "ndjson" and _several_lines(body):  # NDJSON labelled as plain JSON
        for line in body.split(b"\n"):
            if line.strip():
                yield _parse(_text(line, "ndjson"), "ndjson")
    else:
        yield WholeBody(_parse(_text(body, "json"), "json"))


async def _framed_objects(
    request: WireRequest, call: Call, inner: Inner[WireRequest, ResponseItem], fmt: str
) -> AsyncIterator[dict[str, Any]]:
    """The objects of an NDJSON or AWS event stream."""
    items = inner(request, call)
    content_type, chunk = await _head(items)
    chunks = cast(AsyncIterator[bytes], items)  # after the head, only body bytes
    if chunk is not None and _whole_json(content_type, chunk):
        async for obj in _whole_reply(chunk, chunks, fmt):
            yield obj
    elif fmt == "eventstream":
        frames = EventStreamDecoder()
        while chunk is not None:
            for frame in frames.feed(chunk):
                yield frame_object(frame)
            chunk = await anext(chunks, None)
        frames.close()
    else:
        splitter = _LineSplitter()
        while chunk is not None:
            for line in splitter.feed(chunk):
                yield _ndjson_object(line)
            chunk = await anext(chunks, None)
        for line in splitter.close():
            yield _ndjson_object(line)


async def _sse_objects(
    request: WireRequest,
    call: Call,
    inner: Inner[WireRequest, ResponseItem],
    secrets: tuple[str, ...],
) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an event stream. Events after OpenAI's ``[DONE]`` terminator are
    not parsed: they are ignored, with one WARN record, and reading stops
    ``MAX_IGNORED_AFTER_END`` events later."""
    items = inner(request, call)
    content_type, chunk = await _head(items)
    chunks = cast(AsyncIterator[bytes], items)  # after the head, only body bytes
    if chunk is not None and _whole_json(content_type, chunk):
        async for obj in _whole_reply(chunk, chunks, "sse"):
            yield obj
        return
    decoder = SSEDataDecoder()
    feed = decoder.feed
    while chunk is not None:
        events = iter(feed(chunk))  # undecodable bytes raise; a transport failure too
        for data in events:
            if data[:1] == "{" and data.count("{") + data.count("[") <= MAX_DEPTH:
                try:  # the usual event, parsed here: json_limits.loads' fast path, inlined
                    obj = from_json(data, allow_inf_nan=False)
                except ValueError:
                    obj = _parse(data, "sse")  # what jiter refuses, and why
                yield obj
            elif not _skip(data):
                yield _parse(data, "sse")
            elif data.strip() == "[DONE]":
                await _ignore_after_done(sum(1 for _ in events), decoder, chunks, call, secrets)
                return
        chunk = await anext(chunks, None)
    for data in decoder.close():
        if not _skip(data):
            yield _parse(data, "sse")


async def _ignore_after_done(
    ignored: int,
    decoder: SSEDataDecoder,
    chunks: AsyncIterator[bytes],
    call: Call,
    secrets: tuple[str, ...],
) -> None:
    """Read on after ``[DONE]`` (``ignored`` events already), parsing nothing: one WARN if
    anything came, and no more than ``MAX_IGNORED_AFTER_END`` events."""
    warned = False
    while True:
        if ignored and not warned:
            warn_ignored_after_end(call, "data: [DONE]")
            warned = True
        if ignored > MAX_IGNORED_AFTER_END:
            return
        chunk = await anext(chunks, None)
        if chunk is None:
            return
        try:
            ignored += len(decoder.feed(chunk))
        except ProtocolError as error:
            warn_ignored_after_end(call, "data: [DONE]", error, secrets)
            return


MAX_IGNORED_AFTER_END = 64
"""How many events a stream may send after its terminal event before metis stops reading it."""


def warn_ignored_after_end(
    call: Call, terminal: str, error: Exception | None = None, secrets: tuple[str, ...] = ()
) -> None:
    """The one WARN record for a stream that went on after its terminal event (or failed
    while it was read on)."""
    log.warning(
        "%s sent more after %s; ignored%s",
        call.provider,
        terminal,
        f" ({redact(str(error), *secrets, *call.secrets)})" if error is not None else "",
        extra={
            "event": "metis.events_after_end",
            "request_id": call.request_id,
            "session_id": call.session_id,
            "adapter": call.provider,
        },
    )


def _skip(data: str) -> bool:
    """OpenAI's ``[DONE]`` terminator, and events whose data is blank (keep-alives)."""
    if data[:1] == "{":
        return False
    stripped = data.strip()
    return not stripped or stripped == "[DONE]"


def _parse(text: str, fmt: str) -> dict[str, Any]:
    try:
        value = json_limits.loads(text)
    except JSONLimitError as exc:
        raise ProtocolError(
            f"provider sent JSON metis refuses in its {fmt} stream: {exc}"
        ) from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ProtocolError(
            f"provider sent invalid JSON in its {fmt} stream: {text[:_SNIPPET]}"
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(
            f"provider sent a JSON {type(value).__name__} where an object was expected "
            f"in its {fmt} stream: {text[:_SNIPPET]}"
        )
    return value


def _ndjson_object(line: bytes) -> dict[str, Any]:
    """One NDJSON line's object: the usual line parsed at once with ``from_json``, anything
    else (a BOM, leading blanks, what jiter refuses) through :func:`_parse`."""
    try:
        text = line.decode()
    except UnicodeDecodeError:
        text = _text(line, "ndjson")  # raises, classified
    if text[:1] == "{" and text.count("{") + text.count("[") <= MAX_DEPTH:
        try:
            value: dict[str, Any] = from_json(text, allow_inf_nan=False)
            return value
        except ValueError:
            pass
    return _parse(text, "ndjson")


def _text(body: bytes, fmt: str) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            f"provider sent invalid UTF-8 in its {fmt} stream ({exc.reason} at byte {exc.start})"
        ) from None


def _whole_json(content_type: str | None, first: bytes) -> bool:
    """An ``application/json`` answer (whatever its parameters; not ``application/x-ndjson``)
    that opens a JSON object: an event stream mislabelled as JSON is still read as a stream."""
    if content_type is None or first.lstrip()[:1] != b"{":
        return False
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _several_lines(body: bytes) -> bool:
    """Whether ``body`` is JSON documents one per line rather than one document."""
    lines = [line for line in body.split(b"\n") if line.strip()]
    if len(lines) < 2:
        return False
    try:
        json_limits.loads(lines[0].decode("utf-8", "replace"))
    except (ValueError, RecursionError, JSONLimitError):
        return False  # a document spread over lines (pretty-printed), or not JSON at all
    return True


class _LineSplitter:
    """Splits ndjson bytes into its non-blank lines, LF or CRLF (the CR is whitespace to the
    JSON parser), whatever the chunk boundaries.

    It splits on b"\\n" before decoding: a LF byte never occurs inside a UTF-8 multi-byte
    character, so a boundary cannot cut a character that reaches the parser.
    """

    __slots__ = ("_held", "_partial")

    def __init__(self) -> None:
        self._partial: list[bytes] = []
        self._held = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            if chunk:
                self._partial.append(chunk)
                self._held += len(chunk)
                if self._held > MAX_LINE_LENGTH:
                    raise ProtocolError(
                        "provider sent an ndjson line longer than 16 MiB without a line end"
                    )
            return []
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial = []
        if tail:
            self._partial.append(tail)
        self._held = len(tail)
        return [line for line in lines if line.strip()]

    def close(self) -> list[bytes]:
        line = b"".join(self._partial)
        self._partial = []
        self._held = 0
        return [line] if line.strip() else []
