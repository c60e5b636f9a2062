"""AWS's binary event stream (``application/vnd.amazon.eventstream``), sans-IO.

Bedrock's ConverseStream and InvokeModelWithResponseStream answer in frames, each::

    total length (u32) | headers length (u32) | prelude CRC32 (u32)
    headers | payload | message CRC32 (u32)

all big-endian, the prelude CRC over the first 8 bytes and the message CRC over everything
before it. A header is a name (u8 length + UTF-8), a type byte and a typed value; Bedrock
uses string headers (``:message-type``, ``:event-type``, ``:exception-type``,
``:content-type``). The format is documented in AWS's "Event stream encoding" page of the
Transcribe and S3 Select guides and implemented in botocore's ``eventstream`` module.

:class:`EventStreamDecoder` takes bytes in chunks of any size and gives whole frames; both
CRCs are checked, and a stream that ends mid-frame is a :class:`~metis.errors.ProtocolError`.
:func:`frame_object` turns a frame into the object the ``decode`` stage yields:
``{event_type: payload}`` for an event (the shape botocore gives ConverseStream events), and
for an exception frame it raises the classified error (metis/wire/bedrock_converse/errors.py).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metis.errors import ProtocolError
from metis.wire import json_limits
from metis.wire.json_limits import JSONLimitError

_PRELUDE = 12
_CRC = 4
_MIN_FRAME = _PRELUDE + _CRC
MAX_FRAME = 24 << 20  # botocore's limits: 16 MiB payload + 128 KiB headers, with room
_U32 = struct.Struct(">I")
_PRELUDE_FIELDS = struct.Struct(">III")
# Fixed-size header values by type byte: bool true, bool false, byte, short, int, long,
# (6, 7: bytes and string, u16-length-prefixed), timestamp, uuid.
_FIXED_SIZES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_INTS = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}
_KNOWN_HEADER_BLOCKS = 64


@dataclass(slots=True, frozen=True)
class Frame:
    headers: Mapping[str, Any]
    """Shared by frames with the same header block: read it, never change it."""
    payload: bytes


class EventStreamDecoder:
    """Whole frames from event-stream bytes, whatever the chunk boundaries.

    Frames of one stream repeat the same few header blocks, so each distinct block is parsed
    once and its (read-only) mapping shared by the frames that carry it.
    """

    __slots__ = ("_frames_seen", "_known_headers", "_needed", "_parts", "_pending", "failed")

    def __init__(self) -> None:
        self.failed: ProtocolError | None = None
        """A corrupt frame found after whole ones in the same chunk: those were returned, and
        this is raised by the next :meth:`feed` or :meth:`close`."""
        self._pending = b""
        self._parts: list[bytes] = []  # chunks of a large frame, joined once it is whole
        self._needed = 0  # bytes the unfinished frame still lacks
        self._frames_seen = 0
        self._known_headers: dict[bytes, dict[str, Any]] = {}

    def feed(self, chunk: bytes) -> list[Frame]:
        if self.failed is not None:
            raise self.failed
        if self._needed > len(chunk):
            self._parts.append(bytes(chunk))
            self._needed -= len(chunk)
            return []
        if self._parts:
            self._pending = b"".join([self._pending, *self._parts])
            self._parts.clear()
        self._needed = 0
        data = self._pending + chunk if self._pending else bytes(chunk)
        frames: list[Frame] = []
        try:
            self._frames(data, frames)
        except ProtocolError as error:
            if not frames:
                raise
            self.failed = error
        return frames

    def _frames(self, data: bytes, frames: list[Frame]) -> None:
        """Adds the whole frames of ``data`` to ``frames``; keeps the rest for the next chunk."""
        offset, size = 0, len(data)
        with memoryview(data) as view:
            while size - offset >= _PRELUDE:
                total, headers_length, prelude_crc = _PRELUDE_FIELDS.unpack_from(data, offset)
                if zlib.crc32(view[offset : offset + 8]) != prelude_crc:
                    raise self._corrupt("its prelude CRC does not match")
                if total < _MIN_FRAME or total > MAX_FRAME or headers_length > total - _MIN_FRAME:
                    raise self._corrupt(f"its lengths are impossible ({total}, {headers_length})")
                end = offset + total
                if end > size:
                    self._needed = end - size
                    break
                if zlib.crc32(view[offset : end - _CRC]) != _U32.unpack_from(data, end - _CRC)[0]:
                    raise self._corrupt("its message CRC does not match")
                payload_start = offset + _PRELUDE + headers_length
                frames.append(
                    Frame(
                        self._headers(data[offset + _PRELUDE : payload_start]),
                        data[payload_start : end - _CRC],
                    )
                )
                self._frames_seen += 1
                offset = end
        self._pending = data[offset:] if offset < size else b""

    def close(self) -> None:
        """The body ended: anything left over is a frame cut short."""
        if self.failed is not None:
            raise self.failed
        held = len(self._pending) + sum(map(len, self._parts))
        if held:
            self._pending, self._parts, self._needed = b"", [], 0
            raise ProtocolError(
                f"the event stream ended inside a frame ({held} bytes of an unfinished frame "
                f"after {self._frames_seen} whole ones)"
            )

    def _headers(self, raw: bytes) -> dict[str, Any]:
        headers = self._known_headers.get(raw)
        if headers is None:
            headers = _headers(memoryview(raw))
            if len(self._known_headers) < _KNOWN_HEADER_BLOCKS:
                self._known_headers[raw] = headers
        return headers

    def _corrupt(self, why: str) -> ProtocolError:
        self._pending, self._parts, self._needed = b"", [], 0
        return ProtocolError(
            f"event stream frame {self._frames_seen + 1} is corrupt: {why}; the stream "
            "cannot be trusted past it"
        )


def _headers(data: memoryview) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    position, end = 0, len(data)
    while position < end:
        name_end = position + 1 + data[position]
        if name_end >= end:  # the name must leave room for its type byte
            raise _bad_headers("a header name runs past the headers")
        name = _utf8(data[position + 1 : name_end])
        kind = data[name_end]
        position = name_end + 1
        if kind in (6, 7):
            if position + 2 > end:
                raise _bad_headers("a header value runs past the headers")
            (length,) = struct.unpack_from(">H", data, position)
            position += 2
            if position + length > end:
                raise _bad_headers("a header value runs past the headers")
            raw = data[position : position + length]
            headers[name] = _utf8(raw) if kind == 7 else bytes(raw)
            position += length
        elif kind in _FIXED_SIZES:
            size = _FIXED_SIZES[kind]
            if position + size > end:
                raise _bad_headers("a header value runs past the headers")
            if kind in _INTS:
                (headers[name],) = struct.unpack_from(_INTS[kind], data, position)
            elif kind == 9:
                headers[name] = bytes(data[position : position + size])
            else:
                headers[name] = kind == 0
            position += size
        else:
            raise _bad_headers(f"unknown header value type {kind}")
    return headers


def _utf8(raw: memoryview) -> str:
    try:
        return bytes(raw).decode()
    except UnicodeDecodeError as exc:
        raise _bad_headers(f"a header is not UTF-8 ({exc.reason})") from None


def _bad_headers(why: str) -> ProtocolError:
    return ProtocolError(f"event stream frame has malformed headers: {why}")


def frame_object(frame: Frame) -> dict[str, Any]:
    """An event frame as ``{event_type: payload}``; an exception frame raises its error."""
    headers = frame.headers
    kind = headers.get(":message-type", "event")
    if kind == "event":
        event_type = headers.get(":event-type")
        if not isinstance(event_type, str):
            raise ProtocolError("event stream frame has no :event-type header")
        return {event_type: _json(frame.payload, event_type)}
    # Imported here: the Bedrock codec package is loaded only by a stream that fails this way.
    from metis.wire.bedrock_converse.errors import aws_error

    if kind == "exception":
        exception_type = str(headers.get(":exception-type") or "exception")
        data = _json(frame.payload, exception_type) if frame.payload else {}
        raise aws_error(None, {}, exception_type, _message(data))
    if kind == "error":
        code = str(headers.get(":error-code") or "error")
        raise aws_error(None, {}, code, str(headers.get(":error-message") or ""))
    raise ProtocolError(f"event stream frame of unknown :message-type {kind!r}")


def _json(payload: bytes, what: str) -> dict[str, Any]:
    try:
        value = json_limits.loads(payload)
    except JSONLimitError as exc:  # what every other framing refuses (NaN, past 100 levels)
        raise ProtocolError(
            f"event stream {what!r} frame holds JSON metis refuses: {exc}"
        ) from None
    except ValueError:
        raise ProtocolError(
            f"event stream {what!r} frame holds invalid JSON: {payload[:200]!r}"
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(f"event stream {what!r} frame holds a JSON {type(value).__name__}")
    return value


def _message(data: dict[str, Any]) -> str:
    message = data.get("message", data.get("Message", ""))
    return message if isinstance(message, str) else json.dumps(message)


# Encoding, for the emulator and tests: the same format, written.


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string headers and both CRCs (what Bedrock sends)."""
    encoded = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
        for name, value in headers.items()
        for raw in (value.encode(),)
    )
    total = _MIN_FRAME + len(encoded) + len(payload)
    prelude = struct.pack(">II", total, len(encoded))
    prelude += _U32.pack(zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + _U32.pack(zlib.crc32(body))


def event_frame(event_type: str, payload: dict[str, Any]) -> bytes:
    return encode_frame(
        {
            ":event-type": event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        },
        json.dumps(payload, separators=(",", ":")).encode(),
    )


def exception_frame(exception_type: str, message: str) -> bytes:
    return encode_frame(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )
