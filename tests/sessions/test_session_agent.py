"""The agent loop (Session.run): over every family, tool calls answered concurrently, a tool
that fails and one that outlasts its timeout answered as errors, a swap between steps, the
step limit, every step's warnings kept, cancellation in the middle of a tool (the session's
cancel and the caller's own cancel scope), usage and cost summed, structured output at the
end, tools the application answers, and a server-side turn paused and resumed."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

import metis
from metis.cost import cost_of
from metis.model import Role, ToolChoice, ToolDefinition, ToolResultBlock
from metis.sessions import RunComplete, Session, StepComplete, StepStart, ToolResultEvent
from metis.testing.emulator import Emulator

from ..fakes import FakePeer, Reply, anthropic_end, anthropic_start, anthropic_text, sse
from ..session_helpers import DEADLINE, FAMILIES, MODELS, Gate, close_all, emulated

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

NEXT = {
    "anthropic": "openai",
    "openai": "openai_responses",
    "openai_responses": "gemini",
    "gemini": "bedrock",
    "ollama": "anthropic",
    "bedrock": "anthropic",
}
"""Where a run moves after its first step (not to Ollama, whose API has no tool_choice)."""


class Meeting:
    """Two calls that can only finish together: each waits until both have started."""

    def __init__(self) -> None:
        self.arrived = 0
        self.both = anyio.Event()

    def tool(self) -> metis.Tool[..., Any]:
        @metis.tool
        async def get_weather(city: str) -> str:
            """Current weather for a city."""
            self.arrived += 1
            if self.arrived == 2:
                self.both.set()
            await self.both.wait()
            return f"18 C in {city}"

        return get_weather


@pytest.mark.anyio
@pytest.mark.parametrize("family", FAMILIES)
async def test_a_run_answers_parallel_calls_together_until_the_model_stops(
    family: str, emulator: Emulator
) -> None:
    adapters = emulated(emulator, stacks=[family])
    session = Session(MODELS[family], adapters=adapters, tools=[Meeting().tool()])
    with anyio.fail_after(DEADLINE):  # were the calls run one by one, this would never end
        result = await session.arun("What's the weather in Paris and Rome?")
    assert result.reason == "complete" and result.steps == 2
    roles = [m.role for m in session.messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    answers = session.messages[2].content
    assert [b.text for b in answers if isinstance(b, ToolResultBlock)] == [
        "18 C in Paris",
        "18 C in Rome",
    ]
    assert list(result.messages) == session.messages
    assert "Paris" in result.text and "Rome" in result.text
    await close_all(adapters)


@metis.tool
async def get_time(city: str) -> str:
    """The local time in a city."""
    raise RuntimeError("the time service is down")  # at once: no timeout can come first


@pytest.mark.anyio
@pytest.mark.parametrize("family", FAMILIES)
async def test_a_failing_tool_a_slow_tool_a_swap_between_steps_and_the_step_limit(
    family: str, emulator: Emulator
) -> None:
    """The model must call a tool each step (tool_choice any) and takes the tools in turn."""
    adapters = emulated(emulator, stacks=[family, NEXT[family]])
    gate = Gate()
    session = Session(
        MODELS[family],
        adapters=adapters,
        tools=[get_time, gate.tool()],
        tool_choice=ToolChoice.any(),
    )
    served: list[str] = []

    def swap(event: object) -> None:
        if isinstance(event, StepStart):
            served.append(event.model)
        if isinstance(event, StepComplete) and event.step == 1:
            session.model = MODELS[NEXT[family]]

    with anyio.fail_after(DEADLINE):
        result = await session.arun(
            "Use the tools, please.", max_steps=3, tool_timeout_seconds=0.05, on_event=swap
        )
    gate.release.set()
    assert result.reason == "step_limit" and result.steps == 3
    assert served == [MODELS[family], MODELS[NEXT[family]], MODELS[NEXT[family]]]
    answers = [m for m in session.messages if m.role is Role.TOOL]
    texts = [b.text for m in answers for b in m.content if isinstance(b, ToolResultBlock)]
    assert texts[0] == "RuntimeError: the time service is down"
    assert texts[1] == "get_forecast did not finish within 0.05 s"
    assert all(b.is_error for m in answers for b in m.content if isinstance(b, ToolResultBlock))
    assert session.messages[-1].role is Role.TOOL  # the limit leaves every call answered
    follow = await session.arun(tool_choice=ToolChoice.auto())  # and the run goes on
    assert follow.reason == "complete" and follow.steps == 1
    await close_all(adapters)


@pytest.mark.anyio
async def test_usage_and_cost_are_summed_over_the_run(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(MODELS["anthropic"], adapters=adapters, tools=[Meeting().tool()])
    steps: list[Any] = []

    def record(event: object) -> None:
        if isinstance(event, StepComplete):
            steps.append(event.response)

    result = await session.arun("What's the weather in Paris and Rome?", on_event=record)
    assert len(steps) == 2
    assert result.usage.input_tokens == sum(r.usage.input_tokens for r in steps)
    assert result.usage.output_tokens == sum(r.usage.output_tokens for r in steps)
    priced = [cost_of(r.model, r.usage) for r in steps]
    assert list(result.costs) == priced and result.cost_usd == sum(c.usd for c in priced)
    assert result.cost_usd > 0 and session.usage == result.usage
    await close_all(adapters)


@pytest.mark.anyio
async def test_every_steps_warnings_are_kept_in_the_result(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["openai"])
    session = Session(MODELS["openai"], adapters=adapters, tools=[Meeting().tool()], top_k=5)
    steps: list[Any] = []

    def record(event: object) -> None:
        if isinstance(event, StepComplete):
            steps.append(event.response)

    result = await session.arun("What's the weather in Paris and Rome?", on_event=record)
    assert result.steps == 2
    assert list(result.warnings) == [w for r in steps for w in r.warnings]
    assert [w.block_type for w in result.warnings] == ["top_k", "top_k"]
    assert result.response.warnings == [result.warnings[-1]]
    await close_all(adapters)


@pytest.mark.anyio
async def test_the_events_of_a_run_in_order(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["openai"])
    session = Session(MODELS["openai"], adapters=adapters, tools=[Meeting().tool()])
    async with session.astream_run("What's the weather in Paris and Rome?") as events:
        kinds = [event.type async for event in events]
    loop_kinds = [k for k in kinds if k.startswith(("step.", "tool.result", "run."))]
    assert loop_kinds == [
        "step.start",
        "tool.result",
        "tool.result",
        "step.complete",
        "step.start",
        "step.complete",
        "run.complete",
    ]
    first = kinds.index("message.start")
    assert kinds[first - 1] == "step.start" and kinds[kinds.index("tool.result") - 1] == (
        "message.complete"
    )
    await close_all(adapters)


@pytest.mark.anyio
@pytest.mark.parametrize("family", FAMILIES)
async def test_cancel_in_the_middle_of_a_tool_answers_it_as_cancelled(
    family: str, emulator: Emulator
) -> None:
    adapters = emulated(emulator, stacks=[family])
    gate = Gate()
    session = Session(MODELS[family], adapters=adapters, tools=[gate.tool()])

    async def cancel_when_started() -> None:
        await gate.started.wait()
        session.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_started)
        result = await session.arun("What's the forecast for Paris?")
    assert result.reason == "cancelled" and result.steps == 1
    (answer,) = session.messages[-1].content
    assert isinstance(answer, ToolResultBlock) and answer.is_error
    assert answer.text == "get_forecast was cancelled before it finished"
    reply = await session.asend("Never mind. Hello!")  # the history is valid: it goes on
    assert reply.text
    await close_all(adapters)


@pytest.mark.anyio
@pytest.mark.parametrize("family", FAMILIES)
async def test_the_callers_cancel_scope_in_the_middle_of_a_tool_leaves_a_valid_history(
    family: str, emulator: Emulator
) -> None:
    adapters = emulated(emulator, stacks=[family])
    gate = Gate()
    session = Session(MODELS[family], adapters=adapters, tools=[gate.tool()])
    with anyio.CancelScope() as scope:

        async def cancel_when_started() -> None:
            await gate.started.wait()
            scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_started)
            await session.arun("What's the forecast for Paris?")
    assert scope.cancelled_caught and not session.busy
    roles = [m.role for m in session.messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL]
    (answer,) = session.messages[-1].content
    assert isinstance(answer, ToolResultBlock) and "cancelled" in answer.text
    assert (await session.asend("Never mind.")).text
    await close_all(adapters)


class City(BaseModel):
    name: str
    population: int


@pytest.mark.anyio
async def test_structured_output_at_the_end(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["openai"])
    session = Session(MODELS["openai"], adapters=adapters)
    result = await session.arun("Name a big city.", output_type=City)
    assert isinstance(result.output, City) and result.output.name
    await close_all(adapters)


STRUCTURED_CLAUDE = "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"


class Weather(BaseModel):
    city: str
    temperature_c: float


@metis.tool
def forecast(city: str) -> str:
    """Current weather for a city."""
    return f"18 C and sunny in {city}"


@pytest.mark.anyio
@pytest.mark.parametrize("family", FAMILIES)
async def test_a_run_with_tools_ends_in_the_structured_output_asked_for(
    family: str, emulator: Emulator
) -> None:
    """The emulator's model answered tool results in prose whatever the schema, so a new
    user's agent with tools and an output_type failed against it with 'Invalid JSON'."""
    adapters = emulated(emulator, stacks=[family])
    # Nova, the family's model elsewhere, has no structured output on Converse
    model = STRUCTURED_CLAUDE if family == "bedrock" else MODELS[family]
    session = Session(model, adapters=adapters, tools=[forecast])
    result = await session.arun("Weather in Paris?", output_type=Weather)
    assert result.steps == 2 and result.output == Weather(city="Paris", temperature_c=18)
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_tool_the_application_answers_ends_the_run_until_it_does(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    weather = ToolDefinition(
        name="get_weather",
        description="Current weather for a city",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    session = Session(MODELS["anthropic"], adapters=adapters, tools=[weather])
    result = await session.arun("What's the weather in Paris?")
    assert result.reason == "tool_calls_pending" and len(result.pending) == 1
    (call,) = result.pending
    session.add(metis.Message.tool(ToolResultBlock(tool_use_id=call.id, content="sunny")))
    done = await session.arun()
    assert done.reason == "complete" and "sunny" in done.text
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_paused_server_side_turn_is_sent_back_and_goes_on() -> None:
    paused = Reply(
        chunks=sse(anthropic_start(), *anthropic_text("Searching"), *anthropic_end("pause_turn"))
    )
    done = Reply(chunks=sse(anthropic_start(), *anthropic_text(" and found it."), *anthropic_end()))
    peer = FakePeer(paused, done)
    session = Session(MODELS["anthropic"], adapters={"anthropic": peer.adapter("anthropic")})
    result = await session.arun("Search the web for it.")
    assert result.reason == "complete" and result.steps == 2
    sent = json.loads(peer.requests[1].content)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant"]  # the paused turn, as it was
    assert [m.text for m in session.messages] == [
        "Search the web for it.",
        "Searching",
        " and found it.",
    ]


@pytest.mark.anyio
async def test_an_async_event_handler_is_awaited_and_sees_the_run_complete(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["gemini"])
    session = Session(MODELS["gemini"], adapters=adapters, tools=[Meeting().tool()])
    seen: list[str] = []

    async def handler(event: object) -> None:
        await anyio.lowlevel.checkpoint()
        if isinstance(event, ToolResultEvent | RunComplete):
            seen.append(event.type)

    result = await session.arun("What's the weather in Paris and Rome?", on_event=handler)
    assert seen == ["tool.result", "tool.result", "run.complete"] and result.steps == 2
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_cancel_between_a_reply_and_its_tools_answers_every_call_as_cancelled(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["openai"])
    meeting = Meeting()
    session = Session(MODELS["openai"], adapters=adapters, tools=[meeting.tool()])

    def cancel_at_the_reply(event: object) -> None:
        if getattr(event, "type", "") == "message.complete":
            session.cancel()

    result = await session.arun(
        "What's the weather in Paris and Rome?", on_event=cancel_at_the_reply
    )
    assert result.reason == "cancelled" and meeting.arrived == 0
    answers = session.messages[-1].content
    assert [b.text for b in answers if isinstance(b, ToolResultBlock)] == [
        "get_weather was cancelled before it finished",
        "get_weather was cancelled before it finished",
    ]
    assert (await session.asend("Never mind.")).text
    await close_all(adapters)


class Stop(BaseException):
    """What an application raises to leave everything at once (not an Exception)."""


@pytest.mark.anyio
@pytest.mark.parametrize("plain", [False, True], ids=["async", "plain"])
async def test_a_tool_raising_a_base_exception_leaves_the_run_as_itself(
    emulator: Emulator, plain: bool
) -> None:
    """Not a tool's failure to answer but a way out: it goes on out as it was raised, so
    ``except Stop`` sees it (before: inside a BaseExceptionGroup of the run's task group);
    every call is answered, and the session takes the next turn. (SystemExit and
    KeyboardInterrupt in a task leave asyncio's event loop itself, asyncio's own rule.)"""
    raised = Stop

    @metis.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise raised("leave now")

    @metis.tool(name="get_weather")
    async def get_weather_async(city: str) -> str:
        """Current weather for a city."""
        raise raised("leave now")

    tool = get_weather if plain else get_weather_async
    adapters = emulated(emulator, stacks=["openai"])
    session = Session(MODELS["openai"], adapters=adapters, tools=[tool])
    with anyio.fail_after(DEADLINE), pytest.raises(raised, match="leave now"):
        await session.arun("What's the weather in Paris and Rome?")
    answers = session.messages[-1].content
    assert [b.text for b in answers if isinstance(b, ToolResultBlock)] == [
        "get_weather was cancelled before it finished",
        "get_weather was cancelled before it finished",
    ]
    assert (await session.asend("Never mind.")).text
    await close_all(adapters)
