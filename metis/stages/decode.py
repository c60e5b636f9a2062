"""The ``decode`` stage: the provider's response bytes become the JSON objects it sent.

It sits just outside the transport and leaves the request alone. A streamed body is split
into its documents by ``format``: ``sse`` (Server-Sent Events, each event's data one JSON
object; OpenAI's ``[DONE]`` terminator is skipped) or ``ndjson`` (one object per line). A body
that is not streamed, or whose format is ``json``, is one JSON document, parsed once at the
end. Anything that is not a JSON object raises :class:`~metis.errors.ProtocolError`.

A streamed request answered with a whole JSON body (``content-type: application/json``, as
some proxies and servers do) is read as that one document, yielded as a :class:`WholeBody` so
that ``normalize`` reads it as a complete reply. A stream mislabelled as JSON is still read as
its format says: SSE never opens with ``{``, and NDJSON is one document per line.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from metis.errors import ProtocolError
from metis.pipeline.call import Call
from metis.pipeline.stage import Inner, Stage
from metis.pipeline.wire import WireRequest
from metis.providers.sse import MAX_LINE_LENGTH, SSEDecoder

_SNIPPET = 200


class WholeBody(dict[str, Any]):
    """A complete reply's JSON body, given where a stream was expected."""

    __slots__ = ()


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
            return
        chunk = await anext(chunks, None)  # the transport has now set the content type
        if chunk is not None and _whole_json(call.response_content_type, chunk):
            body = b"".join([chunk, *[more async for more in chunks]])
            if fmt == "ndjson" and _several_lines(body):  # NDJSON labelled as plain JSON
                for line in body.split(b"\n"):
                    if line.strip():
                        yield _parse(_text(line, "ndjson"), "ndjson")
            else:
                yield WholeBody(_parse(_text(body, "json"), "json"))
        elif fmt == "sse":
            decoder = SSEDecoder()
            while chunk is not None:
                for event in decoder.feed(chunk):
                    data = event.data
                    if not _skip(data):
                        yield _parse(data, "sse")
                chunk = await anext(chunks, None)
            for event in decoder.close():
                if not _skip(event.data):
                    yield _parse(event.data, "sse")
        else:
            splitter = _LineSplitter()
            while chunk is not None:
                for line in splitter.feed(chunk):
                    yield _parse(_text(line, "ndjson"), "ndjson")
                chunk = await anext(chunks, None)
            for line in splitter.close():
                yield _parse(_text(line, "ndjson"), "ndjson")


def _skip(data: str) -> bool:
    """OpenAI's ``[DONE]`` terminator, and events whose data is blank (keep-alives)."""
    if data[:1] == "{":
        return False
    stripped = data.strip()
    return not stripped or stripped == "[DONE]"


def _parse(text: str, fmt: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
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
        json.loads(lines[0])
    except (ValueError, RecursionError):
        return False  # a document spread over lines (pretty-printed), or not JSON at all
    return True


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
