"""A response body's JSON objects, as its framing delimits them: sans-IO, fed chunk by chunk.

``BodyObjects(fmt, streamed=..., content_type=...)`` takes the body's chunks as they arrive
(``feed(chunk) -> objects``) and its end (``close() -> objects``). The framing ``fmt`` is
``sse`` (each event's data one JSON object; OpenAI's ``[DONE]`` ends it), ``ndjson`` (one
object per line), ``eventstream`` (AWS's binary frames) or ``json``. A body that is not
streamed, or whose framing is ``json``, is one JSON document, parsed once at the end.

A streamed request answered with a whole JSON body (``content-type: application/json``, as
some proxies and servers do) is read as that one document and given as a :class:`WholeBody`,
so that the reader takes it as a complete reply. A stream mislabelled as JSON is still read
as its framing says: SSE never opens with ``{``, and NDJSON is one document per line. A stream
sent as one JSON array of its objects where SSE was expected (Gemini's
``streamGenerateContent`` without ``alt=sse``: a body that opens with ``[``) gives those
objects, in order, each as soon as it is whole (:mod:`metis.wire.framing.json_array`).

Anything that is not a JSON object, and JSON beyond :mod:`metis.wire.json_limits`
(NaN, Infinity, nesting deeper than 100 levels), raises :class:`~metis.errors.ProtocolError`.
After ``[DONE]`` nothing is parsed: :attr:`done` is set, and the events that follow are only
counted (:attr:`ignored`), for the caller to stop reading and say so. An object that raises
(a provider's error frame, invalid JSON) does not take the objects before it in the same
chunk with it: they are returned, and the error is kept in :attr:`failed` for the caller to
raise once it has read them (:attr:`halted` says to look, one check per chunk).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic_core import from_json

from metis.errors import AdapterError, ProtocolError
from metis.wire import json_limits
from metis.wire.compressed import undeclared_compression
from metis.wire.framing.aws_eventstream import EventStreamDecoder, frame_object
from metis.wire.framing.json_array import ArrayObjects
from metis.wire.framing.json_object import body_text, ndjson_object, parse_object
from metis.wire.framing.lines import LineSplitter
from metis.wire.framing.sse_data import SSEDataDecoder
from metis.wire.http_errors import body_excerpt
from metis.wire.json_limits import MAX_DEPTH, SHALLOW_LENGTH, JSONLimitError

FORMATS = ("sse", "ndjson", "json", "eventstream")
_SNIPPET_BYTES = 64 * 1024  # of an HTML page: enough to find its title
MAX_WHOLE_BODY = 64 * 1024 * 1024
"""The largest JSON document held whole (a reply read at once), in bytes: four times a
stream's longest line (:data:`~metis.wire.framing.sse.MAX_LINE_LENGTH`)."""


class WholeBody(dict[str, Any]):
    """A complete reply's JSON body, given where a stream was expected."""

    __slots__ = ()


class BodyObjects:
    """The JSON objects of one response body, in order."""

    __slots__ = (
        "_array",
        "_fmt",
        "_frames",
        "_held",
        "_held_bytes",
        "_lines",
        "_mode",
        "_reader",
        "_sse",
        "content_type",
        "done",
        "failed",
        "halted",
        "ignored",
    )

    def __init__(self, fmt: str, *, streamed: bool, content_type: str | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown framing {fmt!r}; known: {', '.join(FORMATS)}")
        self._fmt = fmt
        self.content_type = content_type
        self._mode = "first" if streamed and fmt != "json" else "whole"
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._sse = SSEDataDecoder() if fmt == "sse" else None
        self._frames = EventStreamDecoder() if fmt == "eventstream" else None
        self._lines = LineSplitter() if fmt == "ndjson" else None
        self._array: ArrayObjects | None = None
        self.halted = False
        """Stop feeding and look at :attr:`done` and :attr:`failed` (one check per chunk)."""
        self.done = False
        """``[DONE]`` was read: what follows is not parsed."""
        self.failed: AdapterError | None = None
        """What an object of the last chunk raised (a provider's error frame, invalid JSON):
        the objects before it were returned, and the caller raises it once they are read."""
        self.ignored = 0
        """How many events came after ``[DONE]``."""
        self._reader: Callable[[BodyObjects, bytes], list[dict[str, Any]]] = (
            BodyObjects._first if self._mode == "first" else BodyObjects._hold
        )
        """Once the first chunk says what the body is, the reader of that framing itself: no
        dispatch per chunk. (A function, not a method bound to this object: that would hold
        the object in a reference cycle, left for the cyclic collector.)"""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Takes a chunk, gives the objects it completes (often none)."""
        return self._reader(self, chunk)

    def each(self, chunk: bytes) -> Iterable[dict[str, Any]]:
        """:meth:`feed`, each object of an event stream parsed only when the one before it
        has been taken: a read of many events holds one parsed object at a time, not all of
        them (which would wake the cyclic collector every few hundred objects). What is set
        when an object fails, and at ``[DONE]``, is set once the objects before it are taken
        (an event stream: SSE's events or NDJSON's lines)."""
        if self._reader is BodyObjects._first:
            begun = self._begin(chunk)
            if begun is None:
                return ()
            chunk = begun
        if self._reader is BodyObjects._sse_objects:
            return self._sse_each(chunk)
        if self._reader is BodyObjects._ndjson_objects:
            return self._ndjson_each(chunk)
        return self._reader(self, chunk)

    def _first(self, chunk: bytes) -> list[dict[str, Any]]:
        begun = self._begin(chunk)
        return [] if begun is None else self._reader(self, begun)

    def _begin(self, chunk: bytes) -> bytes | None:
        """What the body is, from its first chunk that is not blank: its reader is set, and
        the text to read given (with the blank chunks held before it); None while blank."""
        if not chunk.removeprefix(_BOM).strip() and self._held_bytes + len(chunk) <= _SNIPPET_BYTES:
            self._held.append(chunk)  # nothing yet says what the body is: kept for what does
            self._held_bytes += len(chunk)
            return None
        if self._held:
            chunk = b"".join(self._held) + chunk
            self._held.clear()
            self._held_bytes = 0
        if chunk.startswith(_BOM) and (self._frames is None or chunk[3:4] == b"{"):
            chunk = chunk[3:]  # a byte order mark: not the body's first character
        if compressed := undeclared_compression(chunk):
            raise ProtocolError(f"provider sent no {self._fmt} stream: {compressed}")
        if _whole_json(self.content_type, chunk):
            self._mode, self._reader = "reply", BodyObjects._hold
        elif _html(self.content_type, chunk):  # a proxy's page: kept only to say what it was
            self._mode, self._reader = "html", BodyObjects._hold_head
        elif self._sse is not None and chunk.lstrip()[:1] == b"[":
            self._mode, self._reader = "array", BodyObjects._array_objects  # Gemini's, no alt=sse
            self._array = ArrayObjects(_array_object)
        else:
            self._mode = "stream"
            if self._sse is not None:
                self._reader = BodyObjects._sse_objects
            elif self._frames is not None:
                self._reader = BodyObjects._frame_objects
            else:
                self._reader = BodyObjects._ndjson_objects
        return chunk

    def _hold(self, chunk: bytes) -> list[dict[str, Any]]:
        self._held_bytes += len(chunk)
        if self._held_bytes > MAX_WHOLE_BODY:
            self._held.clear()
            raise ProtocolError(
                f"provider sent a JSON body larger than {MAX_WHOLE_BODY >> 20} MiB; "
                "metis reads no larger reply whole"
            )
        self._held.append(chunk)
        return []

    def _hold_head(self, chunk: bytes) -> list[dict[str, Any]]:
        if self._held_bytes < _SNIPPET_BYTES:
            self._held.append(chunk)
            self._held_bytes += len(chunk)
        return []

    def close(self) -> list[dict[str, Any]]:
        mode = self._mode
        if mode == "html":
            page = body_excerpt(b"".join(self._held))
            raise ProtocolError(
                f"provider answered where its {self._fmt} stream was expected with: {page}"
            )
        if mode == "whole":
            return [parse_object(body_text(b"".join(self._held), "json"), "json")]
        if mode == "reply":
            return _whole_reply(b"".join(self._held), self._fmt)
        if mode == "array":
            assert self._array is not None
            self._array.close()
            if self._array.failed is not None:
                raise self._array.failed
            return []
        if self._sse is not None:
            if self.done:
                return []
            return [parse_object(data, "sse") for data in self._sse.close() if not _skip(data)]
        if self._frames is not None:
            self._frames.close()
            return []
        if self._lines is not None:
            return [ndjson_object(line) for line in self._lines.close()]
        return []

    def _array_objects(self, chunk: bytes) -> list[dict[str, Any]]:
        assert self._array is not None
        objects = self._array.feed(chunk)
        if self._array.failed is not None:
            self._fail(self._array.failed)
        return objects

    def _frame_objects(self, chunk: bytes) -> list[dict[str, Any]]:
        assert self._frames is not None
        objects = self._each(self._frames.feed(chunk), frame_object)
        if self._frames.failed is not None and self.failed is None:  # after those objects
            self._fail(self._frames.failed)
        return objects

    def _ndjson_objects(self, chunk: bytes) -> list[dict[str, Any]]:
        return list(self._ndjson_each(chunk))

    def _ndjson_each(self, chunk: bytes) -> Iterator[dict[str, Any]]:
        assert self._lines is not None
        for line in self._lines.feed(chunk):
            try:
                if line[:1] == b"{" and (
                    len(line) < SHALLOW_LENGTH or line.count(b"{") + line.count(b"[") <= MAX_DEPTH
                ):
                    try:  # the usual line, parsed as it is: jiter checks the UTF-8 of its strings
                        obj = from_json(line, allow_inf_nan=False)
                    except ValueError:
                        obj = ndjson_object(line)  # said the long way, which names what is wrong
                else:
                    obj = ndjson_object(line)
            except AdapterError as error:
                self._fail(error)
                return
            yield obj

    def _each(self, items: list[Any], parse: Any) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = []
        for item in items:
            try:
                objects.append(parse(item))
            except AdapterError as error:
                self._fail(error)
                break
        return objects

    def _fail(self, error: AdapterError) -> None:
        self.failed = error
        self.halted = True

    def _sse_objects(self, chunk: bytes) -> list[dict[str, Any]]:
        return list(self._sse_each(chunk))

    def _sse_each(self, chunk: bytes) -> Iterator[dict[str, Any]]:
        assert self._sse is not None
        if self.done:
            self.ignored += len(self._sse.feed(chunk))
            return
        events = self._sse.feed(chunk)  # undecodable bytes raise
        for i, data in enumerate(events):
            try:
                if data[:1] == "{" and (  # too short, or too few brackets, to nest too deep
                    len(data) < SHALLOW_LENGTH or data.count("{") + data.count("[") <= MAX_DEPTH
                ):
                    try:  # the usual event, parsed here: json_limits.loads' fast path, inlined
                        obj = from_json(data, allow_inf_nan=False)
                    except ValueError:
                        obj = parse_object(data, "sse")  # what jiter refuses, and why
                elif not _skip(data):
                    obj = parse_object(data, "sse")
                elif data.strip() == "[DONE]":
                    self.done = self.halted = True
                    self.ignored = len(events) - i - 1
                    return
                else:
                    continue
            except AdapterError as error:
                self._fail(error)
                return
            yield obj


def _whole_reply(body: bytes, fmt: str) -> list[dict[str, Any]]:
    """A streamed request answered with ``application/json``: one whole reply, or NDJSON."""
    if fmt == "ndjson" and _several_lines(body):  # NDJSON labelled as plain JSON
        lines = [line for line in body.split(b"\n") if line.strip()]
        return [parse_object(body_text(line, "ndjson"), "ndjson") for line in lines]
    return [WholeBody(parse_object(body_text(body, "json"), "json"))]


def _array_object(text: str) -> dict[str, Any]:
    """One object of a stream sent as a JSON array."""
    return parse_object(text, "json array")


def _skip(data: str) -> bool:
    """OpenAI's ``[DONE]`` terminator, and events whose data is blank (keep-alives)."""
    if data[:1] == "{":
        return False
    stripped = data.strip()
    return not stripped or stripped == "[DONE]"


_BOM = b"\xef\xbb\xbf"


def _whole_json(content_type: str | None, first: bytes) -> bool:
    """An ``application/json`` answer (whatever its parameters; not ``application/x-ndjson``)
    that opens a JSON object: an event stream mislabelled as JSON is still read as a stream."""
    if content_type is None or first.lstrip()[:1] != b"{":
        return False
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _html(content_type: str | None, first: bytes) -> bool:
    """An HTML page (a proxy's login or error page) where a stream was expected: markup,
    labelled ``text/html`` or opening as a page does (a stream labelled ``text/html`` is
    still read as a stream)."""
    start = first.lstrip()[:15].lower()
    if content_type is not None and content_type.partition(";")[0].strip().lower() == "text/html":
        return start[:1] == b"<"
    return start.startswith((b"<!doctype html", b"<html"))


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
