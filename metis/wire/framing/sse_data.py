"""The ``data`` of each Server-Sent Event in a body, as the ``decode`` stage needs it.

A sans-IO decoder like :class:`metis.wire.framing.sse.SSEDecoder`, and read the same way (feed it
the chunks as they arrive, cut anywhere, then ``close()``), but it hands back only each
event's data (its ``data:`` lines joined by ``"\\n"``): ``event:``, ``id:`` and ``retry:``
fields and ``:`` comments are read and dropped, as an event without data is (but for an
``error:`` field, llama.cpp's failure mid-stream: :func:`_error_data`). That is all a
JSON stream needs, and it lets the common event, ``data: {...}`` alone, be taken whole from
its chunk with a few str methods: one UTF-8 decode and one split per chunk, then one slice
per event, whatever the number of events a read brings (a run of ``event:`` then ``data:``
events, Anthropic's and OpenAI Responses', by one search of the run).

Framing follows the WHATWG ``text/event-stream`` format: lines end with CRLF, LF or CR (a CRLF
split across two chunks is one line end), a blank line ends an event, a leading UTF-8 BOM is
skipped; invalid UTF-8 (also a character cut off by the end of the body), a line longer
than ``max_line_length`` characters without a line end and an event longer than
``max_event_length`` characters without the blank line that ends it raise
:class:`~metis.errors.ProtocolError`. A final event that lacked its blank line is dispatched
by :meth:`SSEDataDecoder.close`, as providers sometimes end the body that way.
"""

from __future__ import annotations

import json
import re
from codecs import utf_8_decode

from metis.errors import ProtocolError
from metis.wire.framing.sse import MAX_EVENT_LENGTH, MAX_LINE_LENGTH, event_too_long
from metis.wire.json_limits import loads


class SSEDataDecoder:
    """Turns the bytes of an event stream into the data of its events, in order."""

    __slots__ = (
        "_bom",
        "_cut",
        "_ends_with_lf",
        "_line",
        "_max",
        "_max_event",
        "_pending",
        "_size",
        "_skip_lf",
    )

    def __init__(
        self, max_line_length: int = MAX_LINE_LENGTH, max_event_length: int = MAX_EVENT_LENGTH
    ) -> None:
        self._max = max_line_length
        self._max_event = max_event_length
        self._size = 0  # length of the pending text
        self._cut = b""  # the start of a UTF-8 character the last chunk ended in
        self._bom = True  # a BOM may still open the text
        self._pending: list[str] = []  # the text after the last blank line, line ends as LF
        self._ends_with_lf = False  # the pending text ends with a line end
        self._line = 0  # length of the pending text's unfinished last line
        self._skip_lf = False  # the last chunk ended in CR: a LF opening the next is its pair

    def feed(self, chunk: bytes) -> list[str]:
        """The data of the events ``chunk`` completes; often none."""
        if self._cut or self._bom:
            text = self._text(chunk)
        else:
            try:
                text = chunk.decode()
            except UnicodeDecodeError:  # a character cut by the chunk's end, or invalid
                text = self._text(chunk)
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if not text:
            return []
        crlf = "\r" in text
        blank = _BLANK_CRLF if crlf else _BLANK_LF
        last = text.rfind(blank)
        if last > 0 and (first := text.find(blank, 0, last)) >= 0:
            # events wholly inside the chunk, between the first blank line and the last
            after = first + len(blank)
            middle = _plain_data(text, after, last, crlf)
            if middle is None and not crlf:
                middle = _typed_data(text, first, last)
            if middle is not None:
                head = self._lines(text[:after], crlf)
                return [*head, *middle, *self._lines(text[last + len(blank) :], crlf)]
        return self._lines(text, crlf)

    def _lines(self, text: str, crlf: bool) -> list[str]:
        """The data of the events ``text`` completes, read line by line, the rest held;
        ``crlf``: ``text`` may have a CR in it."""
        if not text:
            return []
        if crlf and "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n\n" not in text and not (self._ends_with_lf and text[0] == "\n"):
            self._hold(text)  # no blank line yet: no event ends in this chunk
            return []
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
            self._pending = []
            self._size = 0
        elif text[-2:] == "\n\n" and text[:6] == "data: " and text.find("\n") == len(text) - 2:
            return [text[6:-2]]  # the usual chunk: one event, its one data line, nothing after
        end = text.rfind("\n\n")
        rest = text[end + 2 :]
        self._ends_with_lf = False
        self._line = 0
        if rest:
            self._hold(rest)
        return _data(text[:end].split("\n\n"))

    def close(self) -> list[str]:
        """The end of the body: the data of a final event that had no blank line after it."""
        if self._cut:
            raise ProtocolError("provider's event stream ended in the middle of a UTF-8 character")
        text = "".join(self._pending)
        self._pending = []
        self._size = 0
        self._ends_with_lf = False
        self._line = 0
        return _data([text]) if text else []

    def _text(self, chunk: bytes) -> str:
        """``chunk`` decoded, with a character cut at either end joined across chunks."""
        if self._cut:
            chunk = self._cut + chunk
        try:
            text, used = utf_8_decode(chunk, "strict", False)
        except UnicodeDecodeError as exc:
            raise ProtocolError(_bad_utf8(exc)) from None
        self._cut = chunk[used:] if used < len(chunk) else b""
        if self._bom and text:
            self._bom = False
            if text[0] == "\ufeff":
                text = text[1:]
        return text

    def _hold(self, text: str) -> None:
        self._pending.append(text)
        self._size += len(text)
        if self._size > self._max_event:
            raise ProtocolError(event_too_long(self._max_event))
        self._ends_with_lf = text[-1] == "\n"
        last_lf = text.rfind("\n")
        self._line = len(text) - last_lf - 1 if last_lf >= 0 else self._line + len(text)
        if self._line > self._max:
            limit = f"{self._max / 2**20:g} MiB" if self._max >= 2**20 else f"{self._max} chars"
            raise ProtocolError(
                f"provider sent an event-stream line longer than {limit} without a line end"
            )


_BLANK_LF = "\n\n"
_BLANK_CRLF = "\r\n\r\n"


def _plain_data(text: str, start: int, stop: int, crlf: bool) -> list[str] | None:
    """The data of the events in ``text[start:stop]``, a run of whole events, when each is
    one ``data: `` line and nothing else (a large read of a provider's stream): one split,
    no loop per event. None when any is not: then the chunk is read line by line.

    The run is split at each blank line followed by ``data: ``; when no piece has a line end
    left in it (a search of their text joined, which is cheaper than counting), each event
    of the run was one ``data: `` line and nothing else: no comment, no other field."""
    if not text.startswith("data: ", start):
        return None
    data = text[start + 6 : stop].split("\r\n\r\ndata: " if crlf else "\n\ndata: ")
    joined = "".join(data)
    if "\n" in joined or (crlf and "\r" in joined):
        return None
    return data


_TYPED_EVENT = re.compile(r"\n\nevent:[^\n]*\ndata: ?([^\n]*)")


def _typed_data(text: str, blank: int, stop: int) -> list[str] | None:
    """The data of the events in ``text[blank:stop]`` (a run of whole events after the blank
    line at ``blank``; LF line ends) when each is an ``event:`` line then one ``data:`` line
    and nothing else (Anthropic's and OpenAI Responses' events, many a read): one search of
    the run for them all. None when any is not.

    Each match takes exactly three line ends (the blank line before it, and its own between
    its two lines) and ends where a line does, so when the run holds three line ends a match
    and no more, nothing lies between the matches nor after them: the run is those events."""
    data = _TYPED_EVENT.findall(text, blank, stop)
    return data if text.count("\n", blank, stop) == 3 * len(data) else None


def _data(blocks: list[str]) -> list[str]:
    """The data of each event among ``blocks`` (text between blank lines, LF line ends)."""
    out: list[str] = []
    for block in blocks:
        lf = block.find("\n")
        if lf < 0:
            if block[:5] == "data:":  # the usual event: one data line
                out.append(block[6:] if block[5:6] == " " else block[5:])
            elif block[:4] == "data" or block[:6] == "error:":
                out.extend(_fields(block))
        elif (
            block[:6] == "event:"
            and block[lf + 1 : lf + 6] == "data:"
            and "\n" not in block[lf + 1 :]
        ):
            # an event type, then one data line: Anthropic's and OpenAI Responses' events
            out.append(block[lf + 7 :] if block[lf + 6 : lf + 7] == " " else block[lf + 6 :])
        else:
            out.extend(_fields(block))
    return out


def _fields(block: str) -> list[str]:
    """The data of the events in ``block``, read line by line (several fields, comments,
    several data lines, or extra blank lines left by a run of line ends). An event with an
    ``error:`` field and no data (how llama.cpp's server ends a stream that failed) gives that
    error as the data of an error object (:func:`_error_data`)."""
    out: list[str] = []
    data: str | None = None
    error: str | None = None
    for line in [*block.split("\n"), ""]:
        if not line:  # a blank line: the event so far ends here
            if data is not None:
                out.append(data)
            elif error is not None:
                out.append(_error_data(error))
            data = error = None
            continue
        name, _, value = line.partition(":")  # a comment (":...") has the name ""
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            data = value if data is None else f"{data}\n{value}"
        elif name == "error":
            error = value if error is None else f"{error}\n{value}"
    return out


def _error_data(value: str) -> str:
    """An ``error:`` field's value as ``{"type": "error", "error": {...}}``, the error object
    each JSON dialect's reader raises as a classified error: the value's own ``error`` object
    where it has one, the value itself where it is an object, else its text as the message."""
    try:
        said = loads(value)
    except ValueError:
        said = None
    if isinstance(said, dict) and isinstance(said.get("error"), dict):
        said = said["error"]
    if not isinstance(said, dict):
        said = {"message": value}
    return json.dumps({"type": "error", "error": said})


def _bad_utf8(exc: UnicodeDecodeError) -> str:
    bad = exc.object[exc.start : exc.end]
    return f"provider sent invalid UTF-8 in its event stream ({exc.reason}: {bad!r})"
