"""A sans-IO decoder for Server-Sent Events (the WHATWG ``text/event-stream`` format).

Pure code over bytes, in the style of h11 and wsproto: feed it the body as it arrives, in
chunks cut anywhere, and it gives back the complete events; it does no IO of its own::

    decoder = SSEDecoder()
    async for chunk in body:
        for event in decoder.feed(chunk):
            ...
    for event in decoder.close():
        ...

It works a chunk at a time with str methods (one UTF-8 decode, one split per chunk), so the
per-token cost is a handful of C calls per line and one :class:`SSEEvent` per event.

Where it departs from a browser's ``EventSource``: ``id`` and ``event`` belong to the event
they appear in (they are reset after every blank line, never carried to the next event), and
:meth:`SSEDecoder.close` dispatches a final event that lacked its trailing blank line instead
of discarding it, because providers sometimes end the body that way.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from metis.errors import ProtocolError

MAX_LINE_LENGTH = 16 * 1024 * 1024
"""The longest line, in characters, held while waiting for its line end."""
MAX_EVENT_LENGTH = 2 * MAX_LINE_LENGTH
"""The longest event (its lines, however many), in characters, held while waiting for the
blank line that ends it."""

_utf8_sig = codecs.getincrementaldecoder("utf-8-sig")


@dataclass(slots=True)
class SSEEvent:
    data: str
    event: str | None = None
    """The ``event:`` field; None when the event had none (or an empty one)."""
    id: str | None = None


class SSEDecoder:
    """Turns the bytes of an event stream into :class:`SSEEvent` objects.

    Lines end with CRLF, LF or CR, also when a CRLF is split across two chunks; a leading
    UTF-8 BOM is skipped; invalid UTF-8, a line longer than ``max_line_length`` characters
    without a line end and an event whose data passes ``max_event_length`` characters before
    its blank line raise :class:`~metis.errors.ProtocolError`.
    """

    __slots__ = (
        "_data",
        "_decode",
        "_event",
        "_id",
        "_max",
        "_max_event",
        "_partial",
        "_partial_len",
        "_skip_lf",
    )

    def __init__(
        self, max_line_length: int = MAX_LINE_LENGTH, max_event_length: int = MAX_EVENT_LENGTH
    ) -> None:
        self._max = max_line_length
        self._max_event = max_event_length
        self._reset()

    def _reset(self) -> None:
        self._decode = _utf8_sig(errors="strict").decode
        self._partial: list[str] = []  # pieces of the line still waiting for its line end
        self._partial_len = 0
        self._skip_lf = False  # the previous chunk ended in CR: a LF opening this one is its pair
        self._data: str | None = None  # None until the event has a data line
        self._event: str | None = None
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``, in order; often none."""
        try:
            text: str = self._decode(chunk)
        except UnicodeDecodeError as exc:
            raise ProtocolError(_bad_utf8(exc)) from None
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        elif "\n" not in text:
            self._hold(text)
            return []
        lines = text.split("\n")
        tail = lines.pop()  # what follows the last line end: the start of an unfinished line
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial = []
            self._partial_len = 0
        if tail:
            self._hold(tail)
        return self._process(lines)

    def close(self) -> list[SSEEvent]:
        """The end of the body: the events still pending, including a final event that had no
        blank line after it. The decoder is then ready for a new stream."""
        try:
            self._decode(b"", True)
        except UnicodeDecodeError:
            raise ProtocolError(
                "provider's event stream ended in the middle of a UTF-8 character"
            ) from None
        lines = ["".join(self._partial), ""] if self._partial else [""]
        events = self._process(lines)
        self._reset()
        return events

    def _hold(self, text: str) -> None:
        self._partial.append(text)
        self._partial_len += len(text)
        if self._partial_len > self._max:
            limit = f"{self._max / 2**20:g} MiB" if self._max >= 2**20 else f"{self._max} chars"
            raise ProtocolError(
                f"provider sent an event-stream line longer than {limit} without a line end"
            )

    def _process(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        data = self._data
        event = self._event
        id_ = self._id
        for line in lines:
            if line:
                # A comment (":...") has the name "" and falls through every branch.
                name, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if name == "data":
                    data = value if data is None else f"{data}\n{value}"
                    if len(data) > self._max_event:
                        raise ProtocolError(event_too_long(self._max_event))
                elif name == "event":
                    event = value or None
                elif name == "id" and "\0" not in value:
                    id_ = value
            elif data is not None:
                events.append(SSEEvent(data, event, id_))
                data = event = id_ = None
            else:
                event = id_ = None
        self._data = data
        self._event = event
        self._id = id_
        return events


def event_too_long(limit: int) -> str:
    said = f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit} chars"
    return f"provider sent an event-stream event longer than {said} without its end"


def _bad_utf8(exc: UnicodeDecodeError) -> str:
    bad = exc.object[exc.start : exc.end]
    return f"provider sent invalid UTF-8 in its event stream ({exc.reason}: {bad!r})"
