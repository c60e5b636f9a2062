"""A gzip- or deflate-encoded body, decoded in bounded pieces.

httpx decodes each chunk of a body whole: a few kilobytes of a compression bomb (``gzip``
twice over) become gigabytes in one step, before anything after it can look at their size
(the framing's 16 MiB line and 64 MiB reply limits). :func:`decoded` decodes the raw bytes
itself, every layer of ``Content-Encoding`` in turn, and never makes more than
:data:`PIECE` bytes at a time, so those limits hold whatever a body inflates to. A body that
does not decode is httpx's own ``DecodingError``, as before, and so is one whose compressed
stream never ends (cut short, its checksum unread), which httpx takes for whole. Other
encodings (``br``, ``zstd``, where their modules are installed) are left to httpx.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

PIECE = 256 * 1024
"""The most bytes one step of decoding makes."""
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


def encodings_of(response: httpx.Response) -> list[str] | None:
    """The body's encodings in the order they were applied, when each is gzip or deflate
    (``[]``: none); None when any other is named."""
    named = response.headers.get("content-encoding", "").lower().split(",")
    found = [name.strip() for name in named if name.strip() not in ("", "identity")]
    return found if all(name in _WBITS for name in found) else None


async def decoded(raw: AsyncIterator[bytes], encodings: list[str]) -> AsyncIterator[bytes]:
    """``raw``, its ``encodings`` undone from the last applied to the first, in pieces of at
    most :data:`PIECE` bytes."""
    layers = [_Layer(name) for name in reversed(encodings)]
    async for chunk in raw:
        for piece in _through(layers, chunk):
            yield piece
    for index, layer in enumerate(layers):  # what each layer still holds, through the rest
        for piece in layer.finish():
            for out in _through(layers[index + 1 :], piece):
                yield out


def _through(layers: list[_Layer], data: bytes) -> Iterator[bytes]:
    if not layers:
        yield data
        return
    first, rest = layers[0], layers[1:]
    for piece in first.feed(data):
        yield from _through(rest, piece)


class _Layer:
    """One encoding undone. Deflate is tried with its zlib header first, then raw, as httpx
    reads it (servers send both)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = False
        self.inflate = zlib.decompressobj(_WBITS[name])

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self.inflate.decompress(data, PIECE)
            except zlib.error as exc:
                if self.name == "deflate" and not self.started:  # raw deflate, no header
                    self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    self.started = True
                    continue
                raise httpx.DecodingError(f"{self.name}: {exc}") from exc
            self.started = True
            data = self.inflate.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < PIECE:  # all taken in, and all it made given out
                return

    def finish(self) -> Iterator[bytes]:
        try:
            rest = self.inflate.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(f"{self.name}: {exc}") from exc
        if self.started and not self.inflate.eof:  # (an empty body is empty, as httpx reads it)
            raise httpx.DecodingError(
                f"{self.name}: the body was cut short: its compressed stream did not end"
            )
        for start in range(0, len(rest), PIECE):
            yield rest[start : start + PIECE]
