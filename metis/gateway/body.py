"""A request's body as the gateway reads it: within the size limit (counted as it arrives,
whether or not a ``Content-Length`` said it) and the per-request timeout, decompressed when
the client sent it with ``Content-Encoding: gzip`` (every member) or ``deflate`` (the limit
counts the decompressed bytes too), read in the charset its ``Content-Type`` names when that is not
UTF-8 (``charset=iso-8859-1``, ``utf-16``), and parsed as JSON within metis's limits
(metis.wire.json_limits)."""

from __future__ import annotations

import codecs
import zlib
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from metis.core.digits import ascii_digits
from metis.errors import CancelledError, InvalidRequestError
from metis.gateway.errors import BODY_LATE, RequestTimeoutError, RequestTooLargeError
from metis.wire.compressed import undeclared_compression
from metis.wire.json_limits import LoneSurrogateError, loads

GZIP, ZLIB_OR_GZIP = 16 + zlib.MAX_WBITS, 32 + zlib.MAX_WBITS
DECOMPRESSORS = {"gzip": GZIP, "x-gzip": GZIP, "deflate": ZLIB_OR_GZIP}
"""``Content-Encoding`` -> the ``wbits`` zlib reads it with (HTTP's deflate is zlib's format;
32 + also takes a gzip header)."""


async def read_body(request: Request, limit: int, seconds: float) -> Any:
    """The request's JSON body, refused past ``limit`` bytes before more is read."""
    return parse_body(await read_raw(request, limit, seconds))


def parse_body(raw: bytes) -> Any:
    try:
        return loads(raw, text_only=True)
    except LoneSurrogateError as exc:  # it would fail once sent on, or written back
        raise InvalidRequestError(f"the request body is not valid: {exc}") from None
    except (ValueError, RecursionError):
        compressed = undeclared_compression(raw)
        if compressed is not None:
            raise InvalidRequestError(f"the request body is not valid JSON: {compressed}") from None
        raise InvalidRequestError("the request body is not valid JSON") from None


def too_large(limit: int) -> RequestTooLargeError:
    return RequestTooLargeError(f"request body is larger than {limit} bytes")


async def read_raw(request: Request, limit: int, seconds: float) -> bytes:
    """The request's body (decompressed), refused past ``limit`` bytes before more is read,
    or when it has not all come within ``seconds`` (a client sending it a byte at a time
    would hold its connection for good); a client that goes away while sending it is a
    CancelledError, as any call cut short by its caller."""
    try:
        with anyio.CancelScope(deadline=anyio.current_time() + seconds):
            return await _read_raw(request, limit)
    except ClientDisconnect:
        if isinstance(late := request.scope.get(BODY_LATE), str):  # the server's 408, said
            raise RequestTimeoutError(late) from None
        raise CancelledError("the client went away while sending the request") from None
    raise RequestTimeoutError(f"the request body did not arrive within {seconds:g} s")


async def _read_raw(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and not ascii_digits(declared):
        # "²".isdigit() is true, though int() refuses it
        raise InvalidRequestError(f"Content-Length {declared[:40]!r} is not a number of bytes")
    if declared is not None and int(declared) > limit:
        raise too_large(limit)
    decompress = decompressor(request.headers.get("content-encoding"))
    received = bytearray()
    read = 0
    async for chunk in request.stream():
        read += len(chunk)
        if read > limit:
            raise too_large(limit)
        if decompress is not None:
            chunk = decompress.inflate(chunk, limit - len(received))
        received += chunk
        if len(received) > limit:
            raise too_large(limit)
    if decompress is not None and not decompress.eof:
        raise InvalidRequestError("the request body's compressed data ends early")
    body = utf8(bytes(received), request.headers.get("content-type"))
    if len(body) > limit:
        raise too_large(limit)
    return body


UTF8 = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})
"""Charsets whose bytes are UTF-8's already."""


def utf8(raw: bytes, content_type: str | None) -> bytes:
    """``raw`` as UTF-8, read in the charset ``content_type`` names (none: UTF-8, as JSON is)."""
    charset = charset_of(content_type)
    if charset is None or charset in UTF8:
        return raw
    try:
        text = raw.decode(codecs.lookup(charset).name)
    except LookupError:  # unknown, or a codec of bytes to bytes (base64) or text to text
        raise InvalidRequestError(f"Content-Type charset {charset!r} is not known"[:200]) from None
    except UnicodeDecodeError:
        raise InvalidRequestError(
            f"the request body is not valid {charset} text, as its Content-Type says"[:200]
        ) from None
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate: refused as JSON is read


def charset_of(content_type: str | None) -> str | None:
    for parameter in (content_type or "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower() or None
    return None


def decompressor(encoding: str | None) -> Inflater | None:
    """A decompressor for ``encoding`` (None: the body is sent as it is)."""
    name = (encoding or "identity").strip().lower()
    if name == "identity":
        return None
    if name not in DECOMPRESSORS:
        raise InvalidRequestError(
            f"Content-Encoding {name!r} is not supported (gzip, deflate or identity)"[:200]
        )
    return Inflater(DECOMPRESSORS[name])


MAX_MEMBERS = 1024
"""gzip members a body may have: an empty one is 20 bytes and costs a new decompressor, so a
body of them would cost more to read than its size says."""


class Inflater:
    """A body's decompressor: gzip's every member in turn (``cat a.gz b.gz`` is one gzip
    body, as RFC 1952 has it), deflate's one stream and nothing after it."""

    def __init__(self, wbits: int) -> None:
        self._wbits = wbits
        self._zlib = zlib.decompressobj(wbits)
        self._members = 1

    @property
    def eof(self) -> bool:
        """Whether the data so far ends where a member (or the stream) does."""
        return self._zlib.eof

    def inflate(self, chunk: bytes, room: int) -> bytes:
        """``chunk`` decompressed, at most ``room`` + 1 bytes of it (one more says: too
        large), so a small body that inflates without end is refused without holding it."""
        out = []
        while chunk:
            if self._zlib.eof:
                if self._wbits != GZIP:
                    raise InvalidRequestError("the request body has data after its deflate stream")
                self._members += 1
                if self._members > MAX_MEMBERS:
                    raise InvalidRequestError(
                        f"the request body has over {MAX_MEMBERS} gzip members"
                    )
                self._zlib = zlib.decompressobj(self._wbits)
            try:
                piece = self._zlib.decompress(chunk, room + 1)
            except zlib.error:
                raise InvalidRequestError("the request body is not valid compressed data") from None
            out.append(piece)
            room -= len(piece)
            if room < 0:
                break
            chunk = self._zlib.unused_data if self._zlib.eof else b""
        return b"".join(out)
