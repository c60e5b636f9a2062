"""The agent loop: a model call, its tool calls answered, again, until the model stops calling
tools or the step limit is reached.

- The tool calls of one reply run concurrently (the model asked for them together), each
  bounded by ``tool_timeout_seconds``; a tool that raises, times out, is unknown or was called
  with arguments that do not parse is answered with an ``is_error`` result
  (:func:`metis.tools.arun_tool_call`), which the model reads on the next step.
- Tools the provider runs itself are left to it; a reply that pauses a long server-side turn
  (stop reason ``pause_turn``) is sent back as it is, and the provider goes on.
- A tool given only as a :class:`ToolDefinition` is the application's to answer: the run ends
  with ``tool_calls_pending``.
- The model is read at the start of each step, so setting ``session.model`` between steps
  (from an event handler) moves the rest of the run to another model.
- Cancelled in a tool (``session.cancel()``, or the caller's cancel scope), the calls that
  finished keep their results and the others are answered as cancelled, so the history stays
  valid; cancelled in a model call, what arrived of the reply is kept (docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import TypeAdapter

from metis.calls.priced import priced
from metis.calls.request import ModelOptions, validated
from metis.core.raised import carrying, first_raised
from metis.cost import Cost
from metis.errors import ProtocolError
from metis.model.content import Message, ToolResultBlock, ToolUseBlock
from metis.model.events import StreamEvent
from metis.model.request import ToolDefinition
from metis.model.response import CanonicalResponse, DroppedContent, StopKind, TokenUsage
from metis.model.server_tools import ServerToolLike
from metis.sessions.control import TurnControl
from metis.sessions.core import CallRecord, Conversation, add_usage
from metis.sessions.events import (
    RunComplete,
    RunEnd,
    RunEvent,
    RunResult,
    StepComplete,
    StepStart,
    ToolResultEvent,
)
from metis.sessions.models import label
from metis.tool_making import AnyTool, tools_by_name
from metis.tools import arun_tool_call

DEFAULT_MAX_STEPS = 10


@dataclass(frozen=True, slots=True)
class RunSettings:
    max_steps: int = DEFAULT_MAX_STEPS
    tool_timeout_seconds: float | None = None
    output: TypeAdapter[Any] | None = None


@dataclass(slots=True)
class _Tally:
    """What the run has added and spent so far."""

    messages: list[Message]
    usage: TokenUsage
    costs: list[Cost]
    warnings: list[DroppedContent]


async def run_events(
    conversation: Conversation,
    new: list[Message],
    overrides: ModelOptions,
    settings: RunSettings,
    control: TurnControl,
) -> AsyncGenerator[StreamEvent | RunEvent, None]:
    """The run's events, ending with ``run.complete``; the history grows as it goes. The
    model and the session's options are read again at each step."""
    mark = len(conversation.history)
    conversation.history.extend(new)
    tally = _Tally(list(new), TokenUsage(), [], [])
    step = 0
    while True:
        step += 1
        record = CallRecord()
        yield StepStart(step, label(conversation.model))
        tools = conversation.options_with(overrides).get("tools", ())
        step_events = conversation.call(overrides, control, record, mark if step == 1 else None)
        async with aclosing(step_events):
            async for event in step_events:
                yield event
        response = _counted(record, tally)
        calls = [b for b in _kept(record) if isinstance(b, ToolUseBlock)]
        reason: RunEnd | None = None
        results: Message | None = None
        if any(isinstance(t, ToolDefinition) and t.name == c.name for t in tools for c in calls):
            reason = "tool_calls_pending"
        elif calls:  # answered even when cancelled (then as cancelled): the history stays valid
            mine = [t for t in tools if not isinstance(t, ToolDefinition | ServerToolLike)]
            runnable = tools_by_name(mine)  # the provider runs its own tools
            results = await _answer(conversation, calls, runnable, settings, control)
            tally.messages.append(results)
            for call, result in zip(calls, results.content, strict=True):
                assert isinstance(result, ToolResultBlock)
                yield ToolResultEvent(step, call, result)
        elif control.cancelled:
            reason = "cancelled"
        elif response.stop_reason.kind is not StopKind.PAUSE_TURN:
            reason = "complete"
        yield StepComplete(step, response, results, record.compaction)
        if reason is None and control.cancelled:
            reason = "cancelled"
        elif reason is None and step >= settings.max_steps:
            reason = "step_limit"
        if reason is not None:
            yield RunComplete(_result(response, reason, step, tally, calls, settings))
            return


def _counted(record: CallRecord, tally: _Tally) -> CanonicalResponse:
    reply = record.reply
    response = reply.response if reply is not None else None
    if response is None:  # the invariants stage ends every stream with message.complete
        raise ProtocolError(f"{record.model} ended its stream without message.complete")
    kept = reply.kept if reply is not None else None
    if kept is not None:
        tally.messages.append(kept)
    if record.compaction is not None:  # the compact endpoint's call, made before the step's
        tally.usage = add_usage(tally.usage, record.compaction.usage)
        tally.costs.append(record.compaction.cost)
    tally.usage = add_usage(tally.usage, response.usage)
    tally.costs.append(priced(response))
    tally.warnings.extend(response.warnings)
    return response


def _kept(record: CallRecord) -> list[Any]:
    kept = record.reply.kept if record.reply is not None else None
    return list(kept.content) if kept is not None else []


async def _answer(
    conversation: Conversation,
    calls: Sequence[ToolUseBlock],
    tools: dict[str, AnyTool],
    settings: RunSettings,
    control: TurnControl,
) -> Message:
    """Every call answered, concurrently; the tool-result message appended to the history
    even when the run is cancelled in the middle (unfinished calls answered as cancelled)."""
    results: list[ToolResultBlock | None] = [None] * len(calls)

    async def one(i: int, call: ToolUseBlock) -> None:
        results[i] = await arun_tool_call(
            call, tools, timeout_seconds=settings.tool_timeout_seconds
        )

    try:
        if not control.cancelled:  # a cancelled run starts none
            with control.wait():
                async with anyio.create_task_group() as group:
                    for i, call in enumerate(calls):
                        group.start_soon(carrying, one, i, call)
    except BaseExceptionGroup as failed:  # a tool raised what is not an Exception (SystemExit)
        raise first_raised(failed) from None
    finally:
        message = Message.tool(
            *(r if r is not None else _cancelled(c) for r, c in zip(results, calls, strict=True))
        )
        conversation.history.append(message)
    return message


def _cancelled(call: ToolUseBlock) -> ToolResultBlock:
    text = f"{call.name} was cancelled before it finished"
    return ToolResultBlock(tool_use_id=call.id, content=text, is_error=True)


def _result(
    response: CanonicalResponse,
    reason: RunEnd,
    steps: int,
    tally: _Tally,
    calls: Sequence[ToolUseBlock],
    settings: RunSettings,
) -> RunResult:
    output = None
    if settings.output is not None and reason == "complete":
        output = validated(settings.output, response)
    return RunResult(
        response=response,
        reason=reason,
        steps=steps,
        usage=tally.usage,
        costs=tuple(tally.costs),
        messages=tuple(tally.messages),
        output=output,
        pending=tuple(calls) if reason == "tool_calls_pending" else (),
        warnings=tuple(tally.warnings),
    )
