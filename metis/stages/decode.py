"""The ``decode`` stage: the provider's response bytes become the JSON objects it sent.

It sits just outside the transport and leaves the request alone. A streamed body is split
into its documents by ``format``: ``sse`` (Server-Sent Events, each event's data one JSON
object; OpenAI's ``[DONE]`` terminator ends it, and events after it are ignored) or
``ndjson`` (one object per line). A body that is not streamed, or whose format is ``json``,
is one JSON document, parsed once at the end. Anything that is not a JSON object, and JSON
beyond :mod:`metis.providers.json_limits` (NaN, Infinity, nesting deeper than 100 levels),
raises :class:`~metis.errors.ProtocolError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from metis.errors import ProtocolError, redact
from metis.pipeline.call import Call
from metis.pipeline.stage import Inner, Stage
from metis.pipeline.wire import WireRequest
from metis.providers import json_limits
from metis.providers.json_limits import JSONLimitError
from metis.providers.sse import MAX_LINE_LENGTH, SSEDecoder

_SNIPPET = 200


class Decode(Stage[WireRequest, WireRequest, bytes, dict[str, Any]]):
    name = "decode"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        format: Literal["sse", "ndjson", "json"] = "sse"

    options: Options

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, bytes]
    ) -> AsyncIterator[dict[str, Any]]:
        chunks = inner(request, call)
        fmt = self.options.format
        if not request.stream or fmt == "json":
            yield await _whole_body(chunks)
        elif fmt == "sse":
            async for obj in _sse_objects(chunks, call):
                yield obj
        else:
            splitter = _LineSplitter()
            async for chunk in chunks:
                for line in splitter.feed(chunk):
                    yield _parse(_text(line, "ndjson"), "ndjson")
            for line in splitter.close():
                yield _parse(_text(line, "ndjson"), "ndjson")


async def _sse_objects(chunks: AsyncIterator[bytes], call: Call) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an event stream. Events after OpenAI's ``[DONE]`` terminator are
    not parsed: they are ignored, with one WARN record, and reading stops
    ``MAX_IGNORED_AFTER_END`` events later."""
    decoder = SSEDecoder()
    done = False
    ignored = 0
    while True:
        try:
            chunk = await anext(chunks, None)
            if chunk is None:
                break
            events = decoder.feed(chunk)
        except ProtocolError as error:  # undecodable bytes; a transport failure is raised
            if not done:
                raise
            warn_ignored_after_end(call, "data: [DONE]", error)
            return
        for event in events:
            data = event.data
            if done:
                ignored += 1
                if ignored == 1:
                    warn_ignored_after_end(call, "data: [DONE]")
            elif not _skip(data):
                yield _parse(data, "sse")
            elif data.strip() == "[DONE]":
                done = True
        if ignored > MAX_IGNORED_AFTER_END:
            return
    if done:
        return
    for event in decoder.close():
        if not _skip(event.data):
            yield _parse(event.data, "sse")


MAX_IGNORED_AFTER_END = 64
"""How many events a stream may send after its terminal event before metis stops reading it."""


def warn_ignored_after_end(call: Call, terminal: str, error: Exception | None = None) -> None:
    """The one WARN record for a stream that went on after its terminal event (or failed
    while it was read on)."""
    call.log.warning(
        "%s sent more after %s; ignored%s",
        call.provider,
        terminal,
        f" ({redact(str(error), *call.endpoint.secrets)})" if error is not None else "",
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


def _text(body: bytes, fmt: str) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            f"provider sent invalid UTF-8 in its {fmt} stream ({exc.reason} at byte {exc.start})"
        ) from None


async def _whole_body(chunks: AsyncIterator[bytes]) -> dict[str, Any]:
    parts = [chunk async for chunk in chunks]
    return _parse(_text(b"".join(parts), "json"), "json")


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
