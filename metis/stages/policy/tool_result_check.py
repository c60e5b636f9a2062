"""tool_result_check: every tool call answered, every answer called for (docs/contract.md §6).

Providers reject a history where an assistant's tool call has no result before the next
assistant turn, or where a result answers no call; this stage finds both before the request
leaves. ``on_missing: placeholder`` answers a missing call with an error result instead
(useful after a cancelled tool run); orphan results are then dropped with a WARN.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from metis.errors import InvalidRequestError
from metis.model.content import ContentBlock, Message, Role, ToolResultBlock, ToolUseBlock
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage

PLACEHOLDER = "No result was recorded for this tool call."
PAIRED = "tool_result_check: paired"
"""Kept on a history whose calls and results all pair, whatever the mode."""


class ToolResultCheck(RequestStage[CanonicalRequest]):
    name = "tool_result_check"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        on_missing: Literal["error", "placeholder"] = "error"

    options: Options

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        messages = request.messages
        history = call.history(messages)
        if not history.tools_at or history.found(PAIRED):
            return request
        fixed: list[Message] = []
        problems: list[str] = []
        pending: list[str] = []  # calls of the latest assistant turn still unanswered
        calls_of_turn: set[str] = set()
        for index, message in enumerate(messages):
            if message.role is Role.ASSISTANT:
                self._close_turn(pending, fixed, problems)
                pending = [b.id for b in message.content if isinstance(b, ToolUseBlock)]
                calls_of_turn = set(pending)
                fixed.append(message)
                continue
            kept: list[ContentBlock] = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    if block.tool_use_id in calls_of_turn and block.tool_use_id in pending:
                        pending.remove(block.tool_use_id)
                    else:
                        where = message.id or f"messages[{index}]"
                        if self.options.on_missing == "error":
                            problems.append(
                                f"{where} answers tool call {block.tool_use_id!r}, which the "
                                "assistant turn before it did not make (or was answered already)"
                            )
                        else:
                            call.warn_dropped("tool_result", "it answers no tool call", where)
                            continue
                kept.append(block)
            if len(kept) != len(message.content):
                if not kept:
                    continue
                message = message.model_copy(update={"content": kept})
            fixed.append(message)
        self._close_turn(pending, fixed, problems)
        if problems:
            raise InvalidRequestError(
                "the history's tool calls and results do not match: " + "; ".join(problems),
                provider=call.provider,
                request_id=request.request_id,
            )
        unchanged = len(fixed) == len(messages) and all(
            a is b for a, b in zip(fixed, messages, strict=True)
        )
        if unchanged:  # nothing was inserted or dropped: the same in every mode, every call
            history.keep(PAIRED, True)
            return request
        return request.model_copy(update={"messages": fixed})

    def _close_turn(self, pending: list[str], fixed: list[Message], problems: list[str]) -> None:
        if not pending:
            return
        if self.options.on_missing == "error":
            problems.append(
                "tool calls " + ", ".join(repr(p) for p in pending) + " have no result (answer "
                "them before the next message: metis.run_tools(reply, tools) is the message)"
            )
        else:
            results = [
                ToolResultBlock(tool_use_id=p, content=PLACEHOLDER, is_error=True) for p in pending
            ]
            insert_at = _after_last_assistant(fixed)
            fixed.insert(insert_at, Message(role=Role.TOOL, content=results))
        pending.clear()


def _after_last_assistant(messages: list[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role is Role.ASSISTANT:
            return i + 1
    return len(messages)
