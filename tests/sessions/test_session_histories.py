"""The history a session keeps after every kind of turn is one every stack accepts (issue 24):
a text turn, a run with tool calls, a run cancelled in the middle of a tool or while the model
streams its tool call, a turn that failed
in the middle of its stream, a run whose model was swapped between steps, a session
restored from JSON, and a history the Responses API compacted. Each history is then sent, with
a new user message, to every family and platform behind the emulator, which refuses what each
API refuses (unanswered tool calls, foreign ids or signatures, Anthropic's thinking-turn rule,
...); thinking is on wherever the model can think."""

from __future__ import annotations

import anyio
import pytest

from metis.errors import NetworkError
from metis.model import OpaqueBlock, Role, StopKind, ToolResultBlock, ToolUseBlock, ToolUseStart
from metis.sessions import Session, StepComplete
from metis.testing.emulator import Emulator

from .. import stack_table as families
from ..session_helpers import (
    DEADLINE,
    MODELS,
    STACKS,
    THINKING,
    Gate,
    close_all,
    emulated,
    get_weather,
    thinking_for,
)

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # wire formats; cancellation: test_sessions

KINDS = [
    "text",
    "tool_calls",
    "cancelled_mid_tool",
    "cancelled_mid_tool_call",
    "failed_mid_stream",
    "swapped",
    "restored",
    "compacted",
]


async def produce(kind: str, emulator: Emulator, session: Session) -> Session:
    """``session`` (on Anthropic, thinking on) after one turn of ``kind``."""
    if kind == "text":
        reply = await session.asend("Hello there, how are you?")
        assert reply.stop_reason.kind is StopKind.END_TURN
    elif kind == "tool_calls":
        result = await session.arun("What's the weather in Paris and Rome?")
        assert result.reason == "complete" and result.steps == 2
    elif kind == "cancelled_mid_tool":
        await cancelled_in_a_tool(session)
    elif kind == "cancelled_mid_tool_call":
        await cancelled_in_a_tool_call(session)
    elif kind == "failed_mid_stream":
        emulator.push_fault("drop=5")
        with pytest.raises(NetworkError):
            await session.asend("Tell me a long story about the old harbour of Marseille.")
    elif kind == "swapped":

        def swap(event: object) -> None:
            if isinstance(event, StepComplete) and event.step == 1:
                session.model = MODELS["openai"]  # which does not think:
                session.options = {k: v for k, v in session.options.items() if k != "thinking"}

        result = await session.arun("What's the weather in Paris?", on_event=swap)
        assert result.reason == "complete"
        assert result.response.provider == "openai"
    elif kind == "restored":
        await session.arun("What's the weather in Paris and Rome?")
        fresh = emulated(emulator)  # another worker: its own adapters and tool-id store
        session = Session.from_json(session.to_json(), adapters=fresh, tools=[get_weather])
        session.model = MODELS["openai_responses"]  # gpt-4o, which does not think
        session.options = {k: v for k, v in session.options.items() if k != "thinking"}
        await session.asend("And in Oslo?")
    elif kind == "compacted":
        session = await compacted_by_responses(emulator, session)
    return session


async def compacted_by_responses(emulator: Emulator, session: Session) -> Session:
    """A tool run on Anthropic, then a turn on a Responses model whose window the history
    outgrows: compacted by the compact endpoint (a compaction item in an assistant message of
    its own), the session then back on Anthropic with thinking."""
    await session.arun("What's the weather in Paris and Rome?")
    history = session.messages
    store = session.adapters["anthropic"].tool_id_store
    probe = families.adapter("openai_responses", emulator)
    size = probe.estimate_input_tokens(history, [get_weather.definition], None)
    small = families.adapter(
        "openai_responses", emulator, capabilities={"max_context_tokens": size + 100}
    )
    small.tool_id_store = store
    compacting = Session(
        MODELS["openai_responses"],
        history,
        session_id=session.session_id,
        adapters={**session.adapters, "openai_responses": small},
        tools=[get_weather],
        compact="provider",
        context_check="estimate",
        max_output_tokens=100,
    )
    await compacting.asend("Thanks. And what should I pack for the trip, all told?")
    assert any(
        isinstance(b, OpaqueBlock) and b.kind == "compaction"
        for m in compacting.messages
        for b in m.content
    )
    await close_all({"probe": probe, "small": small})
    return Session(
        MODELS["anthropic"],
        compacting.messages,
        session_id=session.session_id,
        adapters=session.adapters,
        tools=[get_weather],
        max_output_tokens=4096,
        thinking=THINKING,
    )


async def cancelled_in_a_tool_call(session: Session) -> None:
    """A run cancelled while the model streams its tool call: the reply is kept without the
    unfinished call (nothing would answer it), so the run has no tool to run."""
    await session.asend("Hello there, how are you?")  # a turn before, kept as it was

    def cancel_in_the_call(event: object) -> None:
        if isinstance(event, ToolUseStart):
            assert session.cancel()

    result = await session.arun("What's the weather in Paris?", on_event=cancel_in_the_call)
    assert result.reason == "cancelled" and result.steps == 1
    assert result.response.stop_reason.kind is StopKind.CANCELLED
    assert not any(isinstance(b, ToolUseBlock) for m in session.messages for b in m.content)
    assert session.messages[2].text == "What's the weather in Paris?"


async def cancelled_in_a_tool(session: Session) -> None:
    gate = Gate()
    session.model = MODELS["anthropic"]

    async def cancel_when_started() -> None:
        await gate.started.wait()
        assert session.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_started)
        result = await session.arun(
            "What's the weather in Paris, and the forecast?", tools=[gate.tool()]
        )
    assert result.reason == "cancelled" and gate.calls == 1
    answer = session.messages[-1]
    assert answer.role is Role.TOOL
    (block,) = answer.content
    assert isinstance(block, ToolResultBlock) and block.is_error
    assert "cancelled" in block.text


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_every_stack_accepts_the_history_a_turn_leaves(kind: str, emulator: Emulator) -> None:
    adapters = emulated(emulator)
    session = Session(
        MODELS["anthropic"],
        adapters=adapters,
        tools=[get_weather],
        max_output_tokens=4096,
        thinking=THINKING,
    )
    with anyio.fail_after(DEADLINE):
        session = await produce(kind, emulator, session)
        history = session.messages
        assert_valid_shape(history)
        accepted = {}
        for stack in STACKS:
            follow = Session(
                MODELS[stack],
                history,
                session_id=session.session_id,
                adapters=session.adapters,
                tools=[get_weather],
            )
            reply = await follow.asend("Thanks. Anything else?", **thinking_for(follow, stack))
            accepted[stack] = reply.stop_reason.kind
    assert set(accepted) == set(STACKS)
    await close_all(adapters)
    await close_all(session.adapters)


def assert_valid_shape(history: list) -> None:  # type: ignore[type-arg]
    """Every tool call answered in the next message, no empty message."""
    for i, message in enumerate(history):
        assert message.content, f"messages[{i}] is empty"
        calls = [b.id for b in message.content if isinstance(b, ToolUseBlock)]
        if calls:
            answered = {
                b.tool_use_id for b in history[i + 1].content if isinstance(b, ToolResultBlock)
            }
            assert answered == set(calls), f"messages[{i}]'s calls are not all answered"
