"""The agent loop over the WebSocket stack (issue 24's tests, on the stateful transport): a tool
that fails and one that outlasts its timeout, the model swapped to an HTTP provider between
steps and back onto the session's connection, the step limit, and cancellation in the middle
of a tool; under asyncio and trio, against the emulator's WebSocket mode on real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from metis.adapter import Adapter
from metis.model import Role, ToolChoice, ToolResultBlock
from metis.sessions import Session, StepComplete, StepStart
from metis.testing.emulator import Emulator

from .. import stack_table as families
from ..session_helpers import DEADLINE, Gate
from ..sessions.test_session_agent import get_time
from .test_websocket_mode import MODEL, STACK, transport_of, turns, ws_adapter

CLAUDE = families.MODELS["anthropic"]


@pytest.fixture
async def adapters(emulator: Emulator) -> AsyncIterator[dict[str, Adapter]]:
    both = {STACK: ws_adapter(emulator), "anthropic": families.adapter("anthropic", emulator)}
    yield both
    for adapter in both.values():
        await adapter.aclose()


@pytest.mark.anyio
async def test_a_failing_and_a_slow_tool_a_swap_to_http_and_back_and_the_step_limit(
    emulator: Emulator, adapters: dict[str, Adapter]
) -> None:
    gate = Gate()
    served: list[str] = []
    async with Session(
        MODEL, adapters=adapters, tools=[get_time, gate.tool()], tool_choice=ToolChoice.any()
    ) as session:

        def swap(event: object) -> None:
            if isinstance(event, StepStart):
                served.append(event.model)
            if isinstance(event, StepComplete):
                session.model = CLAUDE if event.step == 1 else MODEL

        with anyio.fail_after(DEADLINE):
            result = await session.arun(
                "Use the tools, please.", max_steps=3, tool_timeout_seconds=0.05, on_event=swap
            )
        gate.release.set()
        assert result.reason == "step_limit" and result.steps == 3
        assert served == [MODEL, CLAUDE, MODEL]
        answers = [
            b
            for m in session.messages
            if m.role is Role.TOOL
            for b in m.content
            if isinstance(b, ToolResultBlock)
        ]
        assert [b.text for b in answers[:2]] == [
            "RuntimeError: the time service is down",
            "get_forecast did not finish within 0.05 s",
        ]
        assert all(b.is_error for b in answers)
        follow = await session.arun(tool_choice=ToolChoice.auto())
        assert follow.reason == "complete"
        assert transport_of(adapters[STACK]).holds(session.session_id)
    sent = turns(emulator)
    assert sent and all(r.websocket for r in sent)  # every Responses step on the connection
    back = sent[1].json()  # back on the connection: what followed the reply it holds
    assert back["previous_response_id"]
    kinds = [item["type"] for item in back["input"]]
    assert kinds == ["function_call_output", "function_call", "function_call_output"]
    assert len({r.websocket for r in sent}) == 1


@pytest.mark.anyio
async def test_cancel_in_the_middle_of_a_tool_over_websocket_leaves_a_history_that_goes_on(
    emulator: Emulator, adapters: dict[str, Adapter]
) -> None:
    gate = Gate()
    async with Session(MODEL, adapters=adapters, tools=[gate.tool()]) as session:

        async def cancel_when_started() -> None:
            await gate.started.wait()
            assert session.cancel()

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                group.start_soon(cancel_when_started)
                result = await session.arun("What's the forecast for Paris?")
        assert result.reason == "cancelled" and result.steps == 1
        (answer,) = session.messages[-1].content
        assert isinstance(answer, ToolResultBlock) and answer.is_error
        assert "cancelled" in answer.text
        reply = await session.asend("Never mind. Hello!")
        # the cancelled call's error result and the new words go as one user turn, as on the
        # wire; the scripted model answers from the result
        assert "get_forecast was cancelled" in reply.text
    sent = turns(emulator)
    assert all(r.websocket for r in sent)
    last = sent[-1].json()["input"]
    assert [item.get("type", "message") for item in last][-2:] == [
        "function_call_output",
        "message",
    ]
    assert last[-1]["content"][0]["text"] == "Never mind. Hello!"
