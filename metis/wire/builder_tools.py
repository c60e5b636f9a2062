"""The part of :class:`~metis.wire.builder.MessageBuilder` for a tool call's lifetime: its
start, its argument fragments, and its end, which says whether the arguments are final, were
cut off (by the output limit or an abrupt end) or are not a JSON object (docs/contract.md §2)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from metis.model.events import StreamEvent, ToolUseEnd, ToolUseInputDelta, ToolUseStart
from metis.model.response import StopReason
from metis.model.stop import StopKind
from metis.wire.blocks import TOOL, Block
from metis.wire.unicode_text import clean

_ABRUPT = (StopKind.CANCELLED, StopKind.ERROR)

INVALID_ARGUMENTS = "the arguments are not a JSON object"
"""The ``input_error`` of a finished tool call whose arguments do not parse."""
CUT_OFF_ARGUMENTS = "the reply ended before the arguments were complete"
"""The ``input_error`` of a tool call the reply ended in the middle of."""
OUTPUT_LIMIT_ARGUMENTS = (
    "the reply reached its output limit (max_tokens) before the arguments were complete"
)
"""A call cut off by the output limit (docs/contract.md §2): expected, so not reported."""


def limited(reason: StopReason | None) -> bool:
    """The reply stopped at its output limit."""
    return reason is not None and reason.kind is StopKind.MAX_TOKENS


class ToolCalls:
    warn: Callable[..., None]
    stop_reason: StopReason | None
    _blocks: list[Block]
    _by_key: dict[Hashable, Block]
    _events: list[StreamEvent]
    _open_tool: Block | None
    _waiting: Block | None  # a tool call whose end waits for the stop reason

    def _open(self, key: Hashable, kind: str) -> Block:
        raise NotImplementedError  # the builder's own

    def _unicode(self, block: Block, text: str) -> str:
        raise NotImplementedError  # the builder's own

    def _flush(self, block: Block) -> None:
        raise NotImplementedError  # the builder's own

    def tool_start(self, key: Hashable, tool_id: str, name: str) -> None:
        block = self._open(key, TOOL)
        block.tool_id = tool_id = clean(tool_id)
        block.name = name = clean(name)
        self._open_tool = block
        self._events.append(ToolUseStart(block.index, tool_id, name))

    def tool_input(self, key: Hashable, fragment: str) -> None:
        block = self._by_key.get(key)
        if block is None or block.kind != TOOL:
            self.warn("tool_use", f"input fragment for unknown tool block {key!r}")
            return
        if block.ended:
            self.warn("tool_use", f"input fragment after tool {block.tool_id!r} ended")
            return
        if block.held or not fragment.isascii():
            fragment = self._unicode(block, fragment)
        fragment = block.add_input(fragment)
        if fragment:
            self._events.append(ToolUseInputDelta(block.index, block.tool_id, fragment))

    def tool_end(self, key: Hashable, final_input: dict[str, Any] | None = None) -> None:
        """End a tool; ``final_input`` is the provider's authoritative input, when it has one."""
        block = self._by_key.get(key)
        if block is not None and block.kind == TOOL and not block.ended:
            self._end_tool(block, final_input, partial=False)

    def close(self, key: Hashable) -> None:
        """The provider closed a block: for a tool that is its end, otherwise nothing."""
        block = self._by_key.get(key)
        if block is not None and block.kind == TOOL and not block.ended:
            self._end_tool(block, None, partial=False)

    def _end_calls(self, stop: StopReason) -> None:
        """The message stops for ``stop``: the call still open ends, cut off if the stop was
        abrupt or the output limit, and the call waiting for the stop reason settles."""
        cut = limited(stop)
        if self._open_tool is not None:
            # A cut-off stream leaves arguments truncated: expected, so no WARN for them.
            self._end_tool(self._open_tool, None, partial=stop.kind in _ABRUPT, cut=cut)
        if self._waiting is not None:
            last = self._waiting.index == len(self._blocks) - 1
            self._settle(self._waiting, OUTPUT_LIMIT_ARGUMENTS if cut and last else None)

    def _before_next_block(self) -> None:
        """Another block follows: the open call has ended, and the waiting one was not cut
        off."""
        if self._open_tool is not None:
            self._end_tool(self._open_tool, None, partial=False)
        if self._waiting is not None:
            self._settle(self._waiting, None)

    def _end_tool(
        self, block: Block, final_input: dict[str, Any] | None, partial: bool, cut: bool = False
    ) -> None:
        """End a tool call. One whose input may be unfinished waits for the reply's stop
        reason (its ``tool.use_end`` with it): the last block of a reply stopped by the output
        limit was cut off (docs/contract.md §2)."""
        if self._waiting is not None:  # a call before this one: not the one cut off
            self._settle(self._waiting, None)
        if block.held:
            self._flush(block)
        block.ended = True
        if self._open_tool is block:
            self._open_tool = None
        block.read_input(final_input)
        cut = block.index == len(self._blocks) - 1 and (cut or limited(self.stop_reason))
        if block.doubtful and not (partial or cut):
            self._waiting = block
            return
        self._settle(
            block, CUT_OFF_ARGUMENTS if partial else OUTPUT_LIMIT_ARGUMENTS if cut else None
        )

    def _settle(self, block: Block, stopped_early: str | None) -> None:
        """Emit the end of a tool call; ``stopped_early`` says why its arguments, if doubtful,
        are unfinished (None: the reply went on, so they are what the model wrote)."""
        if self._waiting is block:
            self._waiting = None
        if block.doubtful and stopped_early is not None:
            block.input_error = stopped_early
        elif block.unparsed is not None:
            block.input_error = INVALID_ARGUMENTS
        final_input = block.final_input or {}
        self._events.append(
            ToolUseEnd(block.index, block.tool_id, block.name, final_input, block.input_error)
        )
