"""Server-sent events as the providers frame them, and the block bookkeeping every stream
writer shares: canonical events carry a block index and no block end for text or thinking, so
a block closes when the next one opens or the message completes."""

from __future__ import annotations

import json
import time
from json.encoder import encode_basestring
from typing import Any

from metis.core.ids import new_ulid
from metis.gateway.json_text import utf8
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    MessageStart,
    ServerToolCall,
    ServerToolResult,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import StopReason


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def quoted(text: str) -> bytes:
    """``text`` as a JSON string, byte for byte as ``dumps`` writes it (the writers' per-event
    templates put it between pre-built bytes instead of encoding a whole object)."""
    written = encode_basestring(text)
    try:  # (not utf8(): one call less for each delta a writer writes)
        return written.encode()
    except UnicodeEncodeError:
        return utf8(written)


def object_head(fields: dict[str, Any]) -> bytes:
    """``fields`` as a JSON object's first members, open for more: ``{"a":1,``."""
    return utf8(dumps(fields)[:-1]) + b","


def event(name: str, data: Any) -> bytes:
    """``event: name`` and its ``data:`` line (Anthropic's and the Responses API's framing)."""
    return utf8(f"event: {name}\ndata: {dumps(data)}\n\n")


def data(payload: Any) -> bytes:
    """A ``data:``-only event (Chat Completions' framing)."""
    return utf8(f"data: {dumps(payload)}\n\n")


DONE = b"data: [DONE]\n\n"


def new_id(prefix: str) -> str:
    return prefix + new_ulid()


def now() -> int:
    return int(time.time())


class BlockWriter:
    """Canonical events in, the API's bytes out. Subclasses write each step; this class keeps
    which block is open (kind ``text``, ``thinking`` or ``tool``) and closes it in time."""

    def __init__(self) -> None:
        self.open_kind: str | None = None
        self.open_index: int | None = None
        self.blocks = 0  # blocks opened so far: the API's own index of the next one
        self.input_written = False  # whether the open tool block's arguments were streamed
        self.ended = False  # the stream's end (its last event, or its error event) is written
        self.stopping: StopReason | None = None  # why it ended, as its last block closes
        self.text_at: int | None = None  # the open text block's index, when it has a template
        self.text_around = (b"", b"")  # its deltas' bytes before and after the quoted text
        self.input_around: tuple[bytes, bytes] | None = None  # the open tool block's, likewise
        self.thinking_at: int | None = None  # the open thinking block's index and its bytes
        self.thinking_around = (b"", b"")

    def feed(self, item: StreamEvent) -> bytes:
        """``item`` in the API's bytes. More text, tool input or thinking (with no signature)
        for the open block of its kind, most of a stream's events, is written from the block's
        template (:meth:`text_template`, :meth:`input_template`, :meth:`thinking_template`),
        without the dispatch below; the bytes are the same."""
        if item.__class__ is TextDelta:
            if item.content_block_index == self.text_at and item.text:
                head, tail = self.text_around
                return b"".join((head, quoted(item.text), tail))
        elif item.__class__ is ToolUseInputDelta and self.input_around and item.partial_json:
            self.input_written = True
            head, tail = self.input_around
            return b"".join((head, quoted(item.partial_json), tail))
        elif (
            item.__class__ is ThinkingDelta
            and item.content_block_index == self.thinking_at
            and item.thinking
            and not item.signature
        ):
            head, tail = self.thinking_around
            return b"".join((head, quoted(item.thinking), tail))
        return self.written(item)

    def written(self, item: StreamEvent) -> bytes:
        """``item`` in the API's bytes, by its kind (subclasses add what comes first)."""
        if isinstance(item, TextDelta):
            return self._ensure("text", item.content_block_index, item) + self.text(item)
        if isinstance(item, ThinkingDelta):
            return self._ensure("thinking", item.content_block_index, item) + self.thinking(item)
        if isinstance(item, ToolUseStart):
            return self._close() + self._opened("tool", item.content_block_index, item)
        if isinstance(item, ToolUseInputDelta):
            if self.open_kind != "tool" or not item.partial_json:
                return b""
            self.input_written = True
            return self.tool_input(item)
        if isinstance(item, ToolUseEnd):
            return self._close(item) if self.open_kind == "tool" else b""
        if isinstance(item, MessageComplete):
            self.ended, self.stopping = True, item.stop_reason
            return self._close() + self.complete(item)
        if isinstance(item, MessageStart):
            return self.start(item)
        if isinstance(item, CitationDelta):
            return self._ensure("text", item.content_block_index, item) + self.citation(item)
        if isinstance(item, ServerToolCall):
            return self.server_call(item)
        if isinstance(item, ServerToolResult):
            return self.server_result(item)
        return b""

    def _ensure(self, kind: str, index: int, item: StreamEvent) -> bytes:
        if self.open_kind == kind and self.open_index == index:
            return b""
        return self._close() + self._opened(kind, index, item)

    def _opened(self, kind: str, index: int, item: StreamEvent) -> bytes:
        self.open_kind, self.open_index, self.input_written = kind, index, False
        written = self.open_block(kind, item)
        self.blocks += 1
        if kind == "text" and (around := self.text_template()) is not None:
            self.text_at, self.text_around = index, around
        elif kind == "tool":
            self.input_around = self.input_template()
        elif kind == "thinking" and (around := self.thinking_template()) is not None:
            self.thinking_at, self.thinking_around = index, around
        return written

    def _close(self, end: ToolUseEnd | None = None) -> bytes:
        if self.open_kind is None:
            return b""
        self.text_at = self.input_around = self.thinking_at = None
        kind, self.open_kind, self.open_index = self.open_kind, None, None
        whole = b""
        if end is not None and not self.input_written and end.final_input:
            # a provider that sends the arguments whole, at the end: one fragment of them all
            partial = dumps(end.final_input)
            whole = self.tool_input(
                ToolUseInputDelta(end.content_block_index, end.tool_use_id, partial)
            )
        return whole + self.close_block(kind, end)

    # What each API writes ---------------------------------------------------------------------

    def start(self, item: MessageStart) -> bytes:
        return b""

    def citation(self, item: CitationDelta) -> bytes:
        """A source the open text block cites (nothing, for an API that streams none)."""
        return b""

    def server_call(self, item: ServerToolCall) -> bytes:
        """A server tool's call, and below its result (nothing, where the API has none)."""
        return b""

    def server_result(self, item: ServerToolResult) -> bytes:
        return b""

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        raise NotImplementedError

    def text(self, item: TextDelta) -> bytes:
        raise NotImplementedError

    def text_template(self) -> tuple[bytes, bytes] | None:
        """The open text block's deltas as ``head + quoted(text) + tail``: what :meth:`text`
        writes for any non-empty text while the block stays open (None: no such template)."""
        return None

    def input_template(self) -> tuple[bytes, bytes] | None:
        """The open tool block's input deltas as ``head + quoted(partial_json) + tail``: what
        :meth:`tool_input` writes for any non-empty input while it stays open (None: none)."""
        return None

    def thinking_template(self) -> tuple[bytes, bytes] | None:
        """The open thinking block's deltas as ``head + quoted(thinking) + tail``: what
        :meth:`thinking` writes for any non-empty thinking with no signature (None: none)."""
        return None

    def thinking(self, item: ThinkingDelta) -> bytes:
        raise NotImplementedError

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        raise NotImplementedError

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        raise NotImplementedError

    def complete(self, item: MessageComplete) -> bytes:
        raise NotImplementedError

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        """The stream's last bytes when the call fails after it began."""
        raise NotImplementedError
