"""The lines of an NDJSON body, whatever the chunk boundaries (the framing of
:class:`metis.wire.framing.objects.BodyObjects` for ``ndjson``)."""

from __future__ import annotations

from metis.errors import ProtocolError
from metis.wire.framing.sse import MAX_LINE_LENGTH


class LineSplitter:
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
