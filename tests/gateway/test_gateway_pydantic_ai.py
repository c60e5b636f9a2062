"""pydantic-ai agents pointed at ``metis serve``: its OpenAIChatModel, OpenAIResponsesModel and
AnthropicModel, unchanged but for the base URL, each answered by a model of another family
(emulator-backed), run whole and streamed, with a tool over two turns, structured output, and
the gateway's errors arriving as pydantic-ai's own ``ModelHTTPError``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

pytest.importorskip("pydantic_ai")
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider


class City(BaseModel):
    name: str
    population: int


def chat(url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return OpenAIChatModel(model, provider=OpenAIProvider(base_url=url + "/v1", api_key=key))


def responses(url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return OpenAIResponsesModel(model, provider=OpenAIProvider(base_url=url + "/v1", api_key=key))


def messages(url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return AnthropicModel(model, provider=AnthropicProvider(base_url=url, api_key=key))


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


def weather_agent(model: Any, ran: list[str]) -> Agent[None, str]:
    agent = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"Cold in {city}"

    return agent


@pytest.mark.parametrize("kind", MODELS)
def test_an_agent_with_a_tool_whole_and_streamed(url: str, kind: str) -> None:
    make, target = MODELS[kind]
    ran: list[str] = []
    agent = weather_agent(make(url, target), ran)
    result = agent.run_sync("Weather in Oslo?")
    assert result.output == "According to get_weather: Cold in Oslo."
    assert result.usage.requests == 2 and result.usage.output_tokens > 0

    async def streamed() -> list[str]:
        async with agent.run_stream("Weather in Oslo?") as run:
            return [text async for text in run.stream_text(delta=True)]

    deltas = anyio.run(streamed)
    assert ran == ["Oslo", "Oslo"] and "".join(deltas) == result.output


@pytest.mark.parametrize("kind", MODELS)
def test_structured_output(url: str, kind: str) -> None:
    make, target = MODELS[kind]
    assert isinstance(Agent(make(url, target), output_type=City).run_sync("A city?").output, City)


@pytest.mark.parametrize("kind", MODELS)
def test_errors_arrive_as_model_http_errors(url: str, kind: str) -> None:
    make, target = MODELS[kind]
    with pytest.raises(ModelHTTPError) as wrong_key:
        Agent(make(url, target, key="wrong")).run_sync("Hi")
    assert wrong_key.value.status_code == 401
    with pytest.raises(ModelHTTPError) as missing:
        Agent(make(url, "no-such-model")).run_sync("Hi")
    assert missing.value.status_code == 404
