"""pydantic-ai agents pointed at ``metis serve``: its OpenAIChatModel, OpenAIResponsesModel and
AnthropicModel, unchanged but for the base URL, each answered by a model of another family
(emulator-backed), run whole and streamed, with a tool over two turns, structured output, and
the gateway's errors arriving as pydantic-ai's own ``ModelHTTPError``.

Slow, as the other clients of the gateway beyond the official SDKs (the JavaScript SDKs, the
agent CLIs): pydantic-ai is imported by the tests (a fixture), never at collection, where
every worker would pay its import (~3 s of CPU) for tests the default run leaves out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pai() -> SimpleNamespace:
    """pydantic-ai's classes these tests use (skipped where it is not installed)."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.providers.openai import OpenAIProvider

    return SimpleNamespace(
        Agent=Agent,
        ModelHTTPError=ModelHTTPError,
        AnthropicModel=AnthropicModel,
        OpenAIChatModel=OpenAIChatModel,
        OpenAIResponsesModel=OpenAIResponsesModel,
        AnthropicProvider=AnthropicProvider,
        OpenAIProvider=OpenAIProvider,
    )


class City(BaseModel):
    name: str
    population: int


def chat(pai: Any, url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    provider = pai.OpenAIProvider(base_url=url + "/v1", api_key=key)
    return pai.OpenAIChatModel(model, provider=provider)


def responses(pai: Any, url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    provider = pai.OpenAIProvider(base_url=url + "/v1", api_key=key)
    return pai.OpenAIResponsesModel(model, provider=provider)


def messages(pai: Any, url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return pai.AnthropicModel(model, provider=pai.AnthropicProvider(base_url=url, api_key=key))


MODELS: dict[str, tuple[Callable[..., Any], str]] = {
    # pydantic-ai's model class -> the model of another family behind the gateway
    "chat-to-claude": (chat, "sonnet"),
    "responses-to-gemini": (responses, "flash"),
    "anthropic-to-gpt": (messages, "gpt"),
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with gateway_url(Emulator()) as served:
        yield served


def weather_agent(pai: Any, model: Any, ran: list[str]) -> Any:
    agent = pai.Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"Cold in {city}"

    return agent


@pytest.mark.parametrize("kind", MODELS)
def test_an_agent_with_a_tool_whole_and_streamed(pai: Any, url: str, kind: str) -> None:
    make, target = MODELS[kind]
    ran: list[str] = []
    agent = weather_agent(pai, make(pai, url, target), ran)
    result = agent.run_sync("Weather in Oslo?")
    assert result.output == "According to get_weather: Cold in Oslo."
    assert result.usage.requests == 2 and result.usage.output_tokens > 0

    async def streamed() -> list[str]:
        async with agent.run_stream("Weather in Oslo?") as run:
            return [text async for text in run.stream_text(delta=True)]

    deltas = anyio.run(streamed)
    assert ran == ["Oslo", "Oslo"] and "".join(deltas) == result.output


@pytest.mark.parametrize("kind", MODELS)
def test_structured_output(pai: Any, url: str, kind: str) -> None:
    make, target = MODELS[kind]
    agent = pai.Agent(make(pai, url, target), output_type=City)
    assert isinstance(agent.run_sync("A city?").output, City)


@pytest.mark.parametrize("kind", MODELS)
def test_errors_arrive_as_model_http_errors(pai: Any, url: str, kind: str) -> None:
    make, target = MODELS[kind]
    with pytest.raises(pai.ModelHTTPError) as wrong_key:
        pai.Agent(make(pai, url, target, key="wrong")).run_sync("Hi")
    assert wrong_key.value.status_code == 401
    with pytest.raises(pai.ModelHTTPError) as missing:
        pai.Agent(make(pai, url, "no-such-model")).run_sync("Hi")
    assert missing.value.status_code == 404
