"""Keeping secrets out of recorded bodies: decoded, across chunk boundaries, in any escape.

A recorded response is stored as the chunks it arrived in. A key echoed by the server can hide
from a plain ``in`` check in three ways, and each is handled here: inside a compressed body
(:class:`BodyDecoder` undoes gzip and deflate, and brotli when a brotli module is installed,
before anything is stored), cut across two chunks (:func:`scrub_chunks` matches on the joined
body and puts the marker in the chunk where the key began), or written as JSON escapes or
percent-encoding, whole or character by character (:func:`secret_pattern`). Matching is on
bytes, so a body that is not UTF-8 is scrubbed too.
"""

from __future__ import annotations

import importlib
import re
import zlib
from collections.abc import Iterable
from typing import Any

MARKER = b"[REDACTED]"
_SHORT = 8


def secret_pattern(secrets: Iterable[str]) -> re.Pattern[bytes] | None:
    """One bytes pattern matching every secret, each character as itself, as a JSON
    ``\\uXXXX`` escape or as percent-encoded UTF-8 (and ``/`` as ``\\/``); None when there
    is no secret."""
    alternatives = [
        _one(secret) for secret in sorted(set(secrets), key=len, reverse=True) if secret
    ]
    if not alternatives:
        return None
    return re.compile(b"|".join(alternatives))


def _one(secret: str) -> bytes:
    pattern = b"".join(_char(c) for c in secret)
    if len(secret) < _SHORT:  # a short key is only hidden where it stands alone
        pattern = rb"(?<![A-Za-z0-9_\-])" + pattern + rb"(?![A-Za-z0-9_\-])"
    return pattern


def _char(c: str) -> bytes:
    forms = [re.escape(c.encode()), b"\\\\u" + _hex(f"{ord(c):04x}")]
    forms.append(b"".join(b"%" + _hex(f"{byte:02x}") for byte in c.encode()))
    if c == "/":
        forms.append(rb"\\/")
    return b"(?:" + b"|".join(forms) + b")"


def _hex(digits: str) -> bytes:
    return b"".join(
        f"[{d.lower()}{d.upper()}]".encode() if d.isalpha() else d.encode() for d in digits
    )


def scrub_chunks(chunks: list[bytes], pattern: re.Pattern[bytes] | None) -> list[bytes]:
    """``chunks`` with every match of ``pattern`` replaced by ``[REDACTED]``, matching across
    chunk boundaries; chunk boundaries are kept (a chunk a match consumed whole is dropped)."""
    if pattern is None:
        return chunks
    body = b"".join(chunks)
    matches = [m.span() for m in pattern.finditer(body)]
    if not matches:
        return chunks
    out: list[bytes] = []
    offset = 0
    for chunk in chunks:
        start, end = offset, offset + len(chunk)
        offset = end
        piece = bytearray()
        position = start
        for m_start, m_end in matches:
            if m_end <= start or m_start >= end:
                continue
            piece += body[position : max(position, m_start)]
            if m_start >= start:
                piece += MARKER
            position = max(position, min(m_end, end))
        piece += body[position:end]
        if piece:
            out.append(bytes(piece))
    return out


class BodyDecoder:
    """Undoes a response's ``content-encoding`` chunk by chunk (gzip, deflate, brotli)."""

    def __init__(self, encoding: str) -> None:
        self.encodings = [e.strip().lower() for e in encoding.split(",") if e.strip()]
        self.encodings = [e for e in self.encodings if e != "identity"]
        self._stages = [_decompressor(e) for e in reversed(self.encodings)]

    @property
    def can_decode(self) -> bool:
        return all(stage is not None for stage in self._stages)

    def decode(self, chunk: bytes) -> bytes:
        for stage in self._stages:
            assert stage is not None
            chunk = stage.decompress(chunk)
        return chunk

    def flush(self) -> bytes:
        tail = b""
        for stage in self._stages:
            assert stage is not None
            tail = stage.decompress(tail) if tail else b""
            flush = getattr(stage, "flush", None)
            tail += flush() if flush is not None else b""
        return tail


class _Deflate:
    """``deflate`` is zlib-wrapped by the standard, raw by some servers: try both."""

    def __init__(self) -> None:
        self._inner: Any = None

    def decompress(self, data: bytes) -> bytes:
        if self._inner is None:
            self._inner = zlib.decompressobj()
            try:
                return bytes(self._inner.decompress(data))
            except zlib.error:
                self._inner = zlib.decompressobj(-zlib.MAX_WBITS)
        return bytes(self._inner.decompress(data))

    def flush(self) -> bytes:
        return bytes(self._inner.flush()) if self._inner is not None else b""


def _decompressor(encoding: str) -> Any:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return _Deflate()
    if encoding == "br":
        for name in ("brotli", "brotlicffi"):
            try:
                return _Brotli(importlib.import_module(name).Decompressor())
            except ImportError:
                continue
    return None


class _Brotli:
    def __init__(self, inner: Any) -> None:
        self._process = getattr(inner, "process", None) or inner.decompress

    def decompress(self, data: bytes) -> bytes:
        return bytes(self._process(data))
