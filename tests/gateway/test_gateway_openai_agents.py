"""The OpenAI Agents SDK (``openai-agents``) pointed at ``metis serve``: an agent with a function
tool over two turns, run whole (``Runner.run``) and streamed (``Runner.run_streamed``), over the
Responses API (``OpenAIResponsesModel``) and Chat Completions (``OpenAIChatCompletionsModel``),
each answered by a model of another family (emulator-backed); structured output
(``output_type``), ``previous_response_id``, and the gateway's errors as the openai SDK's own.

Slow, as the gateway's other clients beyond the official SDKs: the SDK is imported by a
fixture, never at collection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

pytestmark = pytest.mark.slow

ANSWER = "According to get_weather: Cold in Oslo."
MODELS = {
    # the Agents SDK's model class -> the model of another family behind the gateway
    "responses-to-claude": ("OpenAIResponsesModel", "sonnet"),
    "responses-to-gemini": ("OpenAIResponsesModel", "flash"),
    "chat-to-claude": ("OpenAIChatCompletionsModel", "sonnet"),
    "chat-to-gemini": ("OpenAIChatCompletionsModel", "flash"),
}


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def sdk() -> SimpleNamespace:
    """The Agents SDK (skipped where it is not installed), its tracing off: it would send
    the runs' traces to OpenAI."""
    pytest.importorskip("agents")
    import agents
    import openai

    agents.set_tracing_disabled(True)
    return SimpleNamespace(agents=agents, openai=openai)


@pytest.fixture(scope="module")
def emulator() -> Emulator:
    return Emulator()


@pytest.fixture(scope="module")
def url(emulator: Emulator) -> Iterator[str]:
    with gateway_url(emulator) as served:
        yield served


_clients: list[Any] = []
"""The SDK clients made by the run under way, closed at its end by :func:`run_closing`."""


def model(sdk: Any, url: str, kind: str, key: str = GATEWAY_KEY, target: str = "") -> Any:
    """The SDK's model class of ``kind`` for its model behind the gateway (or ``target``)."""
    cls, behind = MODELS[kind]
    client = sdk.openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    _clients.append(client)
    return getattr(sdk.agents, cls)(model=target or behind, openai_client=client)


def run_closing(function: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """``anyio.run``, closing the clients :func:`model` made on the loop their connections
    belong to. Dropped open, the openai SDK's client schedules its own close on whichever loop
    runs when it is collected, which fails there ("Event loop is closed") and is reported as
    that later test's error."""

    async def closing() -> Any:
        try:
            return await function(*args)
        finally:
            while _clients:
                await _clients.pop().close()

    return anyio.run(closing)


def weather_agent(sdk: Any, chosen: Any, ran: list[str], **more: Any) -> Any:
    @sdk.agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"Cold in {city}"

    return sdk.agents.Agent(name="weather", model=chosen, tools=[get_weather], **more)


async def streamed_run(sdk: Any, agent: Any, said: str) -> tuple[Any, list[str], str]:
    """The streamed run, the kinds of its raw events, and its text as the deltas carried it."""
    run = sdk.agents.Runner.run_streamed(agent, said)
    kinds, text = [], []
    async for event in run.stream_events():
        if event.type == "raw_response_event":
            kinds.append(event.data.type)
            if event.data.type == "response.output_text.delta":
                text.append(event.data.delta)
    return run, kinds, "".join(text)


@pytest.mark.parametrize("kind", MODELS)
def test_an_agent_with_a_tool_over_two_turns_whole_and_streamed(
    sdk: Any, url: str, kind: str
) -> None:
    ran: list[str] = []

    async def both() -> tuple[Any, tuple[Any, list[str], str]]:
        agent = weather_agent(sdk, model(sdk, url, kind), ran, instructions="Be brief.")
        whole = await sdk.agents.Runner.run(agent, "Weather in Oslo?")
        return whole, await streamed_run(sdk, agent, "Weather in Oslo?")

    result, (run, kinds, text) = run_closing(both)
    assert result.final_output == ANSWER
    calls = [item for item in result.new_items if item.type == "tool_call_item"]
    outputs = [item for item in result.new_items if item.type == "tool_call_output_item"]
    assert len(calls) == 1 and outputs[0].output == "Cold in Oslo"
    usage = result.context_wrapper.usage
    assert usage.requests == 2 and usage.input_tokens > 0 and usage.output_tokens > 0
    assert run.final_output == ANSWER and text == ANSWER and ran == ["Oslo", "Oslo"]
    assert kinds.count("response.created") == 2 and kinds.count("response.completed") == 2
    assert "response.function_call_arguments.delta" in kinds


@pytest.mark.parametrize("kind", MODELS)
def test_structured_output_whole_and_streamed(sdk: Any, url: str, kind: str) -> None:
    async def both() -> tuple[Any, Any]:
        agent = sdk.agents.Agent(name="cities", model=model(sdk, url, kind), output_type=City)
        whole = await sdk.agents.Runner.run(agent, "A city?")
        run, _, _ = await streamed_run(sdk, agent, "A city?")
        return whole.final_output, run.final_output

    whole, streamed_output = run_closing(both)
    assert isinstance(whole, City) and isinstance(streamed_output, City)


def test_a_run_continues_a_stored_response(sdk: Any, url: str) -> None:
    """``previous_response_id``: the second run sends only its new input after the first
    run's stored conversation (with its tool call), which the gateway keeps."""
    ran: list[str] = []

    async def two() -> Any:
        agent = weather_agent(sdk, model(sdk, url, "responses-to-claude"), ran)
        first = await sdk.agents.Runner.run(agent, "Weather in Oslo?")
        more = {"previous_response_id": first.last_response_id}
        return await sdk.agents.Runner.run(agent, "Weather in Bergen?", **more)

    assert run_closing(two).final_output == "According to get_weather: Cold in Bergen."
    assert ran == ["Oslo", "Bergen"]


@pytest.mark.parametrize("target", ["sonnet", "flash"])
def test_a_run_chains_its_own_responses(sdk: Any, url: str, target: str) -> None:
    """``auto_previous_response_id``: each model call of the run after the first sends only
    its new items (the tool's output) after the response before it, which the gateway keeps."""
    ran: list[str] = []

    async def chained() -> Any:
        agent = weather_agent(sdk, model(sdk, url, "responses-to-claude", target=target), ran)
        return await sdk.agents.Runner.run(
            agent, "Weather in Oslo?", auto_previous_response_id=True
        )

    assert run_closing(chained).final_output == ANSWER and ran == ["Oslo"]


KEPT = {
    # where the reasoning is kept -> the settings that say so
    "by-the-client": {"store": False, "response_include": ["reasoning.encrypted_content"]},
    "by-the-gateway": {},  # store: true, the SDK's default: the items go back by id alone
}


@pytest.mark.parametrize("mode", ["responses", "chat"])
@pytest.mark.parametrize("kept", ["by-the-client", "by-the-gateway"])
def test_a_handoff_from_claude_to_gpt5_then_gemini_with_reasoning(
    sdk: Any, url: str, mode: str, kept: str
) -> None:
    """An agent on Claude hands the run over to one on gpt-5 (over Responses: passed through
    to OpenAI), and the conversation goes on with one on Gemini, each with reasoning on and
    the whole conversation before it: each model is given back only its own thinking, and
    none refuses what another left."""
    ran: list[str] = []
    cls = {"responses": "OpenAIResponsesModel", "chat": "OpenAIChatCompletionsModel"}[mode]
    more = KEPT[kept] if mode == "responses" else {}
    settings = sdk.agents.ModelSettings(
        reasoning=sdk.openai.types.shared.Reasoning(effort="low"), max_tokens=4000, **more
    )

    def on(name: str) -> Any:
        client = sdk.openai.AsyncOpenAI(base_url=url + "/v1", api_key=GATEWAY_KEY, max_retries=0)
        _clients.append(client)
        return getattr(sdk.agents, cls)(model=name, openai_client=client)

    async def handed() -> tuple[Any, Any]:
        second = weather_agent(sdk, on("gpt5"), ran, model_settings=settings)
        first = sdk.agents.Agent(
            name="first", model=on("sonnet"), model_settings=settings, handoffs=[second]
        )
        run = await sdk.agents.Runner.run(first, "Transfer to weather, for Oslo")
        third = weather_agent(sdk, on("flash"), ran, model_settings=settings)
        asked = [*run.to_input_list(), {"role": "user", "content": "Weather in Rome?"}]
        return run, await sdk.agents.Runner.run(third, asked)

    handed_over, went_on = run_closing(handed)
    assert handed_over.last_agent.name == "weather"
    kinds = [item.type for item in handed_over.new_items if item.type != "reasoning_item"]
    assert kinds == ["handoff_call_item", "handoff_output_item", "message_output_item"]
    assert went_on.final_output == "According to get_weather: Cold in Rome." and ran == ["Rome"]


@pytest.mark.parametrize("kept", list(KEPT))
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_claudes_thinking_stays_in_a_tool_loop(
    sdk: Any, url: str, emulator: Emulator, streamed: bool, kept: str
) -> None:
    """The SDK sends the conversation and its reasoning items back after the tool call:
    with ``store: false`` and ``include: ["reasoning.encrypted_content"]`` they carry Claude's
    signed thinking; by default (``store: true``) they carry only their ids, and the gateway
    finds the thinking in the responses it kept. Either way Claude gets it back (the gateway
    left it out before: thinking was off)."""
    settings = sdk.agents.ModelSettings(
        reasoning=sdk.openai.types.shared.Reasoning(effort="low"), max_tokens=4000, **KEPT[kept]
    )
    ran: list[str] = []

    async def run() -> Any:
        chosen = model(sdk, url, "responses-to-claude")
        agent = weather_agent(sdk, chosen, ran, model_settings=settings)
        if streamed:
            return (await streamed_run(sdk, agent, "Weather in Oslo?"))[0]
        return await sdk.agents.Runner.run(agent, "Weather in Oslo?")

    assert run_closing(run).final_output == ANSWER and ran == ["Oslo"]
    first, second = emulator.bodies("anthropic")[-2:]
    assert first["thinking"]["type"] == "enabled" and second.get("thinking") == first["thinking"]
    assert [block["type"] for block in second["messages"][1]["content"]] == [
        "thinking",
        "tool_use",
    ]


@pytest.mark.parametrize("kind", ["responses-to-claude", "chat-to-gemini"])
def test_errors_arrive_as_the_openai_sdks_own(sdk: Any, url: str, kind: str) -> None:
    async def run(key: str, target: str = "") -> Any:
        chosen = model(sdk, url, kind, key, target)
        return await sdk.agents.Runner.run(sdk.agents.Agent(name="a", model=chosen), "Hi")

    with pytest.raises(sdk.openai.AuthenticationError):
        run_closing(run, "wrong")
    with pytest.raises(sdk.openai.NotFoundError):
        run_closing(run, GATEWAY_KEY, "no-such")
