"""invariants: the canonical event stream keeps the rules of docs/contract.md §2, or fails loudly.

1. ``message.start`` comes first, once.
2. Each tool call: one ``tool.use_start``, its input deltas, one ``tool.use_end``, in order.
3. ``tool.use_end.final_input`` is a JSON object.
4. ``message.complete`` is last, and its ``final_content`` holds what the deltas said.
5. Block events carry non-decreasing ``content_block_index`` values.

A violation raises InvariantViolation naming the rule. It is outermost in every stack, so it
checks exactly what the application receives.
"""

from __future__ import annotations

from typing import Any, NoReturn

from metis.errors import InvariantViolation
from metis.model.content import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
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
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch

RULES = {
    1: "message.start precedes everything, once",
    2: "each tool call has one tool.use_start, then its input deltas, then one tool.use_end",
    3: "tool.use_end.final_input is a JSON object",
    4: "message.complete is the last event and reflects every delta",
    5: "content_block_index never decreases",
}


class Invariants(EventHook[Any]):
    """A per-event hook: each call's events go through a :class:`StreamChecker` of its own,
    in the engine's one loop (no frame of its own per event)."""

    name = "invariants"

    async def open(self, request: Any, call: Call) -> tuple[Any, Watch]:
        return request, _Checking()


class StreamChecker:
    """The rules as a small state machine; usable on its own over any event sequence:
    ``check`` each event (it is handed back), then ``check_ended``."""

    __slots__ = (
        "_citations",
        "_complete",
        "_index",
        "_open_tools",
        "_parts",
        "_started",
        "_text",
        "_thinking",
        "_tool_inputs",
        "_tool_names",
        "_tools",
        "_whole",
    )

    def __init__(self) -> None:
        self._started = False
        self._complete = False
        self._index = -1
        self._open_tools: dict[str, int] = {}
        self._tools: dict[str, int] = {}
        self._tool_names: dict[str, str] = {}
        self._tool_inputs: dict[str, Any] = {}
        self._text: dict[int, list[str]] = {}
        # index -> [thinking parts, signature parts, redacted parts]
        self._thinking: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self._citations: dict[int, list[Any]] = {}
        self._whole: dict[int, Any] = {}  # server tool calls and results, by index
        self._parts: list[str] | None = None  # the text of the block at _index, once it has some

    def check(self, event: StreamEvent) -> StreamEvent:
        parts = self._parts
        if (
            parts is not None
            and event.__class__ is TextDelta
            and event.content_block_index == self._index
        ):  # the usual event: more text for the block the last event was in
            parts.append(event.text)
            return event
        return self._check(event)

    def _check(self, event: StreamEvent) -> StreamEvent:
        if self._complete:
            _fail(4, f"{event.type} arrived after message.complete")
        cls = type(event)
        if cls is TextDelta:
            assert isinstance(event, TextDelta)
            index = event.content_block_index
            if index != self._index or index < 0:  # the last event's block passed every check
                self._block(index, event)
            parts = self._text.get(index)
            if parts is None:
                parts = self._text[index] = []
            parts.append(event.text)
            self._parts = parts
        elif cls is MessageStart:
            if self._started:
                _fail(1, "a second message.start")
            self._started = True
        elif cls is ToolUseInputDelta:
            assert isinstance(event, ToolUseInputDelta)
            self._block(event.content_block_index, event)
            self._open_tool(event.tool_use_id, event.content_block_index, event)
        elif cls is ThinkingDelta:
            assert isinstance(event, ThinkingDelta)
            self._block(event.content_block_index, event)
            seen = self._thinking.get(event.content_block_index)
            if seen is None:
                seen = self._thinking[event.content_block_index] = ([], [], [])
            seen[0].append(event.thinking)
            if event.signature is not None:
                seen[1].append(event.signature)
            if event.redacted_data is not None:
                seen[2].append(event.redacted_data)
        elif cls is ToolUseStart:
            assert isinstance(event, ToolUseStart)
            self._block(event.content_block_index, event)
            if event.tool_use_id in self._tools:
                _fail(2, f"a second tool.use_start for {event.tool_use_id!r}")
            self._tools[event.tool_use_id] = event.content_block_index
            self._tool_names[event.tool_use_id] = event.tool_name
            self._open_tools[event.tool_use_id] = event.content_block_index
        elif cls is ToolUseEnd:
            assert isinstance(event, ToolUseEnd)
            self._block(event.content_block_index, event)
            self._open_tool(event.tool_use_id, event.content_block_index, event)
            del self._open_tools[event.tool_use_id]
            final_input: Any = event.final_input
            if not isinstance(final_input, dict):
                _fail(3, f"final_input of {event.tool_use_id!r} is {type(final_input).__name__}")
            self._tool_inputs[event.tool_use_id] = final_input
        elif cls is MessageComplete:
            assert isinstance(event, MessageComplete)
            self._complete_message(event)
        elif cls is CitationDelta or cls is ServerToolCall or cls is ServerToolResult:
            assert isinstance(event, CitationDelta | ServerToolCall | ServerToolResult)
            self._cited_or_whole(event)
        else:
            raise InvariantViolation(f"unknown event type {cls.__name__}")
        return event

    def check_ended(self) -> None:
        if not self._complete:
            _fail(4, "the stream ended without message.complete")

    def _block(self, index: int, event: StreamEvent) -> None:
        if not self._started:
            _fail(1, f"{event.type} before message.start")
        if index < self._index:
            _fail(5, f"{event.type} at index {index} after index {self._index}")
        if index != self._index:
            self._parts = None
        self._index = index

    def _cited_or_whole(self, event: CitationDelta | ServerToolCall | ServerToolResult) -> None:
        index = event.content_block_index
        self._block(index, event)
        if isinstance(event, CitationDelta):
            self._citations.setdefault(index, []).append(event.citation)
            return
        if index in self._whole or index in self._text or index in self._citations:
            _fail(4, f"{event.type} at index {index}, which holds another block")
        self._whole[index] = event.block

    def _open_tool(self, tool_use_id: str, index: int, event: StreamEvent) -> None:
        if tool_use_id not in self._open_tools:
            state = "ended" if tool_use_id in self._tools else "never started"
            _fail(2, f"{event.type} for tool {tool_use_id!r}, which {state}")
        if self._open_tools[tool_use_id] != index:
            _fail(2, f"{event.type} for tool {tool_use_id!r} moved to index {index}")

    def _complete_message(self, event: MessageComplete) -> None:
        if not self._started:
            _fail(1, "message.complete before message.start")
        if self._open_tools:
            _fail(2, f"tools {sorted(self._open_tools)} never ended")
        self._complete = True
        self._parts = None  # nothing may follow: every event goes the long way
        content = event.final_content
        for index, parts in self._text.items():
            block = content[index] if index < len(content) else None
            if not isinstance(block, TextBlock) or block.text != "".join(parts):
                _fail(4, f"final_content[{index}] does not hold the text its deltas carried")
        for index, (thinking, signature, redacted) in self._thinking.items():
            block = content[index] if index < len(content) else None
            if redacted:
                ok = isinstance(block, RedactedThinkingBlock) and block.data == "".join(redacted)
            else:
                ok = (
                    isinstance(block, ThinkingBlock)
                    and block.thinking == "".join(thinking)
                    and (not signature or block.signature == "".join(signature))
                )
            if not ok:
                _fail(4, f"final_content[{index}] does not hold the reasoning its deltas carried")
        for index, citations in self._citations.items():
            block = content[index] if index < len(content) else None
            if not isinstance(block, TextBlock) or (block.citations or []) != citations:
                _fail(4, f"final_content[{index}] does not hold the citations its events carried")
        for index, whole in self._whole.items():
            if index >= len(content) or content[index] != whole:
                _fail(4, f"final_content[{index}] is not the {whole.type} block its event carried")
        for tool_use_id, index in self._tools.items():
            block = content[index] if index < len(content) else None
            if not isinstance(block, ToolUseBlock) or block.id != tool_use_id:
                _fail(4, f"final_content[{index}] is not tool call {tool_use_id!r}")
            if block.name != self._tool_names[tool_use_id]:
                _fail(4, f"final_content[{index}] names tool {block.name!r}, not the one started")
            if block.input != self._tool_inputs[tool_use_id]:
                _fail(4, f"final_content[{index}] input differs from tool.use_end's final_input")


class _Checking(StreamChecker, Watch):
    """One call's checker, as the watch the engine hands each event."""

    event = StreamChecker.check

    def close(self, error: BaseException | None) -> BaseException | None:
        if error is None:
            self.check_ended()
        return None


def _fail(rule: int, detail: str) -> NoReturn:
    raise InvariantViolation(f"stream invariant {rule} ({RULES[rule]}) violated: {detail}")
