"""A stream sent as one JSON array of its objects (Gemini's ``streamGenerateContent`` without
``alt=sse``: ``[{...}\\r\\n,{...}]``), read as it arrives: each object is given as soon as its
closing brace has come, whatever the chunk boundaries, with the same objects in the same order
as reading the whole array at the end would give.

Sans-IO. Only the bytes that shape JSON are looked at between objects (brackets, braces,
quotes, commas, backslashes: no multi-byte UTF-8 character holds one), so a chunk is scanned
once; each object is parsed once, whole, by :func:`~metis.wire.framing.json_object.parse_object`'s
rules (JSON limits included). What is not an array of objects (a number or a string among them,
text outside the objects, an array that never ends) is a ProtocolError; the objects before it
are still given (:attr:`ArrayObjects.failed` holds it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from metis.errors import AdapterError, ProtocolError
from metis.wire.framing.sse import MAX_LINE_LENGTH

_SHAPING = re.compile(rb'[\[\]{}",\\]')
_BACKSLASH, _QUOTE = ord("\\"), ord('"')
_OPENING, _CLOSING = frozenset(b"{["), frozenset(b"}]")


class ArrayObjects:
    """The objects of one JSON array, fed in chunks. ``parse(text)`` reads one object's text
    (raising a ProtocolError for what is not one)."""

    __slots__ = (
        "_depth", "_escaped", "_in_string", "_parse", "_piece", "_size", "_state", "failed"
    )  # fmt: skip

    def __init__(self, parse: Callable[[str], dict[str, Any]]) -> None:
        self._parse = parse
        self._state = "start"  # start, next (an object or ]), after (, or ]), object, end
        self._depth = 0
        self._in_string = self._escaped = False
        self._piece: list[bytes] = []  # the object being read, as its chunks' parts
        self._size = 0
        self.failed: AdapterError | None = None
        """What stopped the reading; the objects before it were given."""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        if self.failed is not None:
            return []
        objects: list[dict[str, Any]] = []
        try:
            self._scan(chunk, objects)
        except AdapterError as error:
            self.failed = error
        return objects

    def close(self) -> list[dict[str, Any]]:
        """The end of the body: an array not closed is a ProtocolError."""
        if self.failed is None and self._state != "end":
            self.failed = _invalid("it ended before the array did")
        return []

    def _scan(self, chunk: bytes, objects: list[dict[str, Any]]) -> None:
        last = 0  # where the bytes not yet taken start
        skip = 0 if self._escaped else -1  # the byte a backslash escaped
        for match in _SHAPING.finditer(chunk):
            at = match.start()
            if self._state != "object":
                _blank(chunk[last:at])
                self._between(chunk[at : at + 1])
                self._depth, last = 1, at if self._state == "object" else at + 1
                continue
            byte = chunk[at]
            if at == skip:
                continue
            if self._in_string:
                if byte == _BACKSLASH:
                    skip = at + 1
                elif byte == _QUOTE:
                    self._in_string = False
            elif byte == _QUOTE:
                self._in_string = True
            elif byte in _OPENING:
                self._depth += 1
            elif byte in _CLOSING:
                self._depth -= 1
                if self._depth == 0:
                    self._object_done(chunk[last : at + 1], objects)
                    last = at + 1
        self._escaped = skip == len(chunk)
        if self._state == "object":
            self._keep(chunk[last:])
        else:
            _blank(chunk[last:])

    def _between(self, byte: bytes) -> None:
        state = self._state
        if state == "start" and byte == b"[":
            self._state = "next"
        elif state in ("next", "after") and byte == b"]":
            self._state = "end"
        elif state == "next" and byte == b"{":
            self._state = "object"
        elif state == "after" and byte == b",":
            self._state = "next"
        elif state == "next" and byte in (b"[", b'"'):
            raise _not_objects()
        else:
            raise _invalid(f"{byte.decode()!r} where the array had no place for it")

    def _keep(self, part: bytes) -> None:
        self._piece.append(part)
        self._size += len(part)
        if self._size > MAX_LINE_LENGTH:
            raise ProtocolError("provider sent a stream object longer than 16 MiB")

    def _object_done(self, tail: bytes, objects: list[dict[str, Any]]) -> None:
        self._piece.append(tail)
        data = b"".join(self._piece)
        self._piece, self._size, self._state = [], 0, "after"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                f"provider sent invalid UTF-8 in its json array stream ({exc.reason})"
            ) from None
        objects.append(self._parse(text))


def _blank(between: bytes) -> None:
    """Between the array's objects there is only white space (else: a number, a literal)."""
    if between and not between.isspace():
        raise _not_objects()


def _not_objects() -> ProtocolError:
    return ProtocolError("provider sent a JSON array of something else than objects")


def _invalid(what: str) -> ProtocolError:
    return ProtocolError(f"provider sent an invalid JSON array for its stream: {what}")
