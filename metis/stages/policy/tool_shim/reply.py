"""The reply side of the tool shim: a small state machine over the canonical events of a
text-only endpoint's reply, which passes text through as it arrives and turns each complete
``<tool_call>`` tag into the canonical tool events.

Only the shortest suffix that could begin a tag is held back until the next fragment decides
it, and whitespace that would open a text block of its own is held until real text follows it
(whitespace alone between or around calls is layout: it is dropped, so no whitespace-only
text block reaches a provider that refuses one). Events from inside are never changed: one
that must move to another block index is passed on as a new event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from metis.core.ids import new_tool_id
from metis.model.content import ContentBlock, TextBlock, ToolUseBlock
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import StopKind, StopReason
from metis.stages.policy.tool_shim.call_json import parse_call
from metis.stages.policy.tool_shim.tags import CLOSE, OPEN, RESULT

Warn = Callable[[str, str], None]
"""Told ``(reason, the text concerned)`` for what looked like a call and stays text."""

_TEXT, _CALL, _DROP = 0, 1, 2  # modes: text, inside a tag, dropping invented results
_ABRUPT = (StopKind.CANCELLED, StopKind.ERROR, StopKind.MAX_TOKENS)
_SELF_STOPPED = (StopKind.END_TURN, StopKind.STOP_SEQUENCE)


class ToolCallParser:
    """The reply side as a small state machine over canonical events, usable on its own:
    ``feed`` one event from inside, then take what to pass outward from ``out``.

    Output blocks are kept in ``_blocks`` in index order: a list of text fragments for a text
    block (joined once, at the end), a ToolUseBlock for a parsed call, or the inner index of
    any other block (reasoning, a native tool call), copied from the inner final content.
    """

    __slots__ = (
        "_blocks",
        "_body",
        "_calls",
        "_discarded",
        "_held",
        "_inner_index",
        "_inner_text",
        "_mapped",
        "_mode",
        "_seen",
        "_tail",
        "_text_index",
        "_text_parts",
        "_tools",
        "_warn",
        "_ws",
        "out",
    )

    def __init__(self, tools: frozenset[str], warn: Warn) -> None:
        self.out: list[StreamEvent] = []
        self._tools = tools
        self._warn = warn
        self._blocks: list[Any] = []
        self._inner_index = -1
        self._inner_text = False
        self._seen: set[int] = set()
        self._mapped: dict[int, int] = {}
        self._text_parts: list[str] | None = None
        self._text_index = -1
        self._mode = _TEXT
        self._held = ""  # text mode: a suffix that could begin a tag
        self._ws = ""  # whitespace that would open a text block of its own
        self._body: list[str] = []  # call mode: the tag's content so far
        self._tail = ""  # call mode: the last characters, where a closing tag may begin
        self._calls = 0
        self._discarded = 0

    @property
    def calls(self) -> int:
        return self._calls

    def feed(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            text = event.text
            parts = self._text_parts
            if (
                parts is not None
                and not self._mode
                and not self._held
                and event.content_block_index == self._inner_index
                and "<" not in text
            ):  # the hot path: more text for the open block, with no tag in sight
                parts.append(text)
                outer = self._text_index
                self.out.append(
                    event if event.content_block_index == outer else TextDelta(outer, text)
                )
                return
            if event.content_block_index != self._inner_index or not self._inner_text:
                self._switch(event.content_block_index, text=True)
            if self._mode == _TEXT and not self._held and "<" not in text:
                self._emit(text, event)
            else:
                self._consume(text)
        elif isinstance(event, MessageComplete):
            self._complete(event)
        elif isinstance(event, MessageStart):
            self.out.append(event)
        else:  # reasoning, or a tool call the endpoint made itself: moved to its new index
            index = getattr(event, "content_block_index", None)
            if isinstance(index, int):
                if index != self._inner_index or self._inner_text:
                    self._switch(index, text=False)
                mapped = self._mapped[index]
                if mapped != index:  # every event with a block index is a dataclass
                    event = dataclasses.replace(event, content_block_index=mapped)  # type: ignore[type-var]
            self.out.append(event)

    # Blocks ------------------------------------------------------------------------------

    def _switch(self, index: int, text: bool) -> None:
        if self._inner_text:
            self._flush(abrupt=False)
        self._inner_index = index
        self._inner_text = text
        self._seen.add(index)
        if not text:
            self._text_parts = None
            self._ws = ""
            if index not in self._mapped:
                self._mapped[index] = len(self._blocks)
                self._blocks.append(index)

    def _emit(self, text: str, event: TextDelta | None = None) -> None:
        """Pass ``text`` outward as text; whitespace that would open a block is held."""
        if not text:
            return
        parts = self._text_parts
        if parts is None:
            if text.isspace():
                self._ws += text
                return
            if self._ws:
                text, event, self._ws = self._ws + text, None, ""
            self._text_index = len(self._blocks)
            parts = self._text_parts = []
            self._blocks.append(parts)
        parts.append(text)
        if event is None or event.content_block_index != self._text_index:
            self.out.append(TextDelta(self._text_index, text))
        else:  # the inner event, carrying this very text at the same index
            self.out.append(event)

    def _consume(self, text: str) -> None:
        if self._mode == _DROP:
            self._discarded += len(text)
            return
        if self._mode == _TEXT and self._held:
            text, self._held = self._held + text, ""
        pos, end = 0, len(text)
        while pos < end:
            if self._mode == _CALL:
                pos = self._in_call(text, pos)
                continue
            start = text.find(OPEN, pos)
            result = text.find(RESULT, pos) if self._calls else -1
            if result != -1 and (start == -1 or result < start):
                self._emit(text[pos:result])
                self._mode = _DROP
                self._discarded = end - result
                self._ws = ""
                return
            if start == -1:
                lt = text.rfind("<", pos)
                if lt != -1 and _may_begin_tag(text[lt:], self._calls > 0):
                    self._emit(text[pos:lt])
                    self._held = text[lt:]
                else:
                    self._emit(text[pos:])
                return
            self._emit(text[pos:start])
            self._mode = _CALL
            self._body = []
            self._tail = ""
            pos = start + len(OPEN)

    def _in_call(self, text: str, pos: int) -> int:
        """Take the tag's content from ``text[pos:]``; where text mode resumes, or the end."""
        tail = self._tail
        rest = text[pos:]
        window = tail + rest
        found = window.find(CLOSE)
        if found == -1:
            self._body.append(rest)
            self._tail = window[-(len(CLOSE) - 1) :]
            return len(text)
        body = "".join(self._body)
        if found >= len(tail):
            body += window[len(tail) : found]
        else:  # the closing tag began in an earlier fragment
            body = body[: len(body) - (len(tail) - found)]
        self._body = []
        self._tail = ""
        self._mode = _TEXT
        self._call(body)
        return pos + found - len(tail) + len(CLOSE)

    def _call(self, body: str) -> None:
        parsed = parse_call(body)
        if isinstance(parsed, str):
            self._warn(parsed, body)
            self._emit(OPEN + body + CLOSE)
            return
        name, arguments, raw = parsed
        if name not in self._tools:
            self._warn(f"the model called {name!r}, a tool the request does not offer", body)
            self._emit(OPEN + body + CLOSE)
            return
        self._text_parts = None
        self._ws = ""
        index = len(self._blocks)
        tool_id = new_tool_id()
        self._blocks.append(ToolUseBlock(id=tool_id, name=name, input=arguments))
        self._calls += 1
        self.out.append(ToolUseStart(index, tool_id, name))
        self.out.append(ToolUseInputDelta(index, tool_id, raw))
        self.out.append(ToolUseEnd(index, tool_id, name, arguments))

    def _flush(self, abrupt: bool) -> None:
        """The inner text block ended: what was held back is text after all."""
        if self._mode == _CALL:
            body = "".join(self._body)
            self._mode, self._body, self._tail = _TEXT, [], ""
            if not abrupt:
                self._warn("a <tool_call> tag was never closed", body)
            self._emit(OPEN + body)
        elif self._held:
            held, self._held = self._held, ""
            self._emit(held)
        if self._ws and not self._calls and self._text_parts is None:
            ws, self._ws = self._ws, ""  # a reply of whitespace alone, and no call: as it came
            self._text_index = len(self._blocks)
            self._text_parts = [ws]
            self._blocks.append(self._text_parts)
            self.out.append(TextDelta(self._text_index, ws))
        self._ws = ""

    def _complete(self, event: MessageComplete) -> None:
        stop = event.stop_reason
        if self._inner_text:
            self._flush(abrupt=stop.kind in _ABRUPT)
        inner = event.final_content
        content: list[ContentBlock] = []
        for block in self._blocks:
            if isinstance(block, list):
                content.append(TextBlock(text="".join(block)))
            elif isinstance(block, int):
                if block < len(inner):
                    content.append(inner[block])
            else:
                content.append(block)
        # Blocks the inner stream never announced with an event are kept, after the rest.
        content.extend(b for i, b in enumerate(inner) if i not in self._seen)
        if self._calls and (
            stop.kind in _SELF_STOPPED
            or (self._mode == _DROP and stop.kind is StopKind.PROVIDER_SPECIFIC)
        ):
            stop = StopReason(kind=StopKind.TOOL_USE, raw=stop.raw)
        if self._discarded > len(RESULT):
            self._warn(
                f"the model wrote tool results of its own after its calls; dropped "
                f"{self._discarded} characters",
                RESULT,
            )
        self.out.append(dataclasses.replace(event, final_content=content, stop_reason=stop))


def _may_begin_tag(suffix: str, after_call: bool) -> bool:
    return OPEN.startswith(suffix) or (after_call and RESULT.startswith(suffix))
