"""LangChain's chat models pointed at ``metis serve``: ``ChatOpenAI`` over Chat Completions and
over the Responses API (``use_responses_api``), and ``ChatAnthropic``, each answered by a model
of another family (emulator-backed): ``invoke``, ``stream`` (with its usage), ``bind_tools``
with a tool round trip (whole and streamed), ``with_structured_output`` by each method, and
the gateway's errors as the underlying SDK's own.

Slow, as the gateway's other clients beyond the official SDKs: LangChain is imported by a
fixture, never at collection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import reduce
from operator import add
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

pytestmark = pytest.mark.slow

HELLO = "You said: Hello there"


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def lc() -> SimpleNamespace:
    """LangChain's classes these tests use (skipped where they are not installed)."""
    pytest.importorskip("langchain_openai")
    pytest.importorskip("langchain_anthropic")
    import anthropic
    import openai
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"Cold in {city}"

    return SimpleNamespace(
        ChatOpenAI=ChatOpenAI,
        ChatAnthropic=ChatAnthropic,
        HumanMessage=HumanMessage,
        ToolMessage=ToolMessage,
        get_weather=get_weather,
        errors={"openai": openai, "anthropic": anthropic},
    )


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with gateway_url(Emulator()) as served:
        yield served


def chat(lc: Any, url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return lc.ChatOpenAI(
        model=model, base_url=url + "/v1", api_key=key, max_retries=0, stream_usage=True
    )


def responses(lc: Any, url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return lc.ChatOpenAI(
        model=model, base_url=url + "/v1", api_key=key, max_retries=0, use_responses_api=True
    )


def messages(lc: Any, url: str, model: str, key: str = GATEWAY_KEY) -> Any:
    return lc.ChatAnthropic(model=model, base_url=url, api_key=key, max_retries=0)


MODELS: dict[str, tuple[Callable[..., Any], str, str]] = {
    # LangChain's chat model -> the model of another family behind it, the SDK under it
    "chat-to-claude": (chat, "sonnet", "openai"),
    "responses-to-gemini": (responses, "flash", "openai"),
    "anthropic-to-gpt": (messages, "gpt", "anthropic"),
}


def text_of(message: Any) -> str:
    """A reply's text: a string, or the Responses API's list of content parts."""
    if isinstance(message.content, str):
        return message.content
    return "".join(part.get("text", "") for part in message.content if isinstance(part, dict))


@pytest.mark.parametrize("kind", MODELS)
def test_invoke_and_stream(lc: Any, url: str, kind: str) -> None:
    make, target, _ = MODELS[kind]
    llm = make(lc, url, target)
    whole = llm.invoke("Hello there")
    assert text_of(whole) == HELLO
    assert whole.usage_metadata["input_tokens"] > 0 and whole.usage_metadata["output_tokens"] > 0
    chunks = list(llm.stream("Hello there"))
    assert len(chunks) > 2
    joined = reduce(add, chunks)
    assert text_of(joined) == HELLO
    assert joined.usage_metadata["output_tokens"] == whole.usage_metadata["output_tokens"]


@pytest.mark.parametrize("kind", MODELS)
def test_a_tool_round_trip_whole_and_streamed(lc: Any, url: str, kind: str) -> None:
    make, target, _ = MODELS[kind]
    bound = make(lc, url, target).bind_tools([lc.get_weather])
    for streamed in (False, True):
        said = [lc.HumanMessage("Weather in Oslo?")]
        asked = reduce(add, bound.stream(said)) if streamed else bound.invoke(said)
        (call,) = asked.tool_calls
        assert call["name"] == "get_weather" and call["args"] == {"city": "Oslo"}
        result = lc.ToolMessage(lc.get_weather.invoke(call["args"]), tool_call_id=call["id"])
        history = [*said, asked, result]
        answer = reduce(add, bound.stream(history)) if streamed else bound.invoke(history)
        assert text_of(answer) == "According to get_weather: Cold in Oslo."


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
@pytest.mark.parametrize("kind", MODELS)
def test_structured_output(lc: Any, url: str, kind: str, method: str) -> None:
    make, target, _ = MODELS[kind]
    structured = make(lc, url, target).with_structured_output(City, method=method)
    assert isinstance(structured.invoke("A city?"), City)


@pytest.mark.parametrize("kind", MODELS)
def test_errors_arrive_as_the_sdks_own(lc: Any, url: str, kind: str) -> None:
    make, target, sdk = MODELS[kind]
    with pytest.raises(lc.errors[sdk].AuthenticationError):
        make(lc, url, target, key="wrong").invoke("Hi")
    with pytest.raises(lc.errors[sdk].NotFoundError):
        make(lc, url, "no-such-model").invoke("Hi")


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_chat_anthropic_thinks_over_tool_turns_as_gemini_then_claude(
    lc: Any, url: str, streamed: bool
) -> None:
    """``ChatAnthropic`` with thinking, its conversation begun on Gemini and carried on by
    Claude: Gemini's unsigned thinking goes back to Gemini alone (handed out unsigned, it went
    to Claude, which refused it: the streamed one with no ``signature`` at all)."""
    said: list[Any] = [lc.HumanMessage("Weather in Oslo?")]
    for model in ("flash", "sonnet", "sonnet", "sonnet"):
        thinking = {"type": "enabled", "budget_tokens": 2000}
        llm = lc.ChatAnthropic(
            model=model, base_url=url, api_key=GATEWAY_KEY, max_tokens=4000, thinking=thinking
        )
        bound = llm.bind_tools([lc.get_weather])
        asked = reduce(add, bound.stream(said)) if streamed else bound.invoke(said)
        said.append(asked)
        if asked.tool_calls:
            (call,) = asked.tool_calls
            result = lc.get_weather.invoke(call["args"])
            said.append(lc.ToolMessage(result, tool_call_id=call["id"]))
        else:
            assert text_of(asked).startswith("According to get_weather: Cold in")
            said.append(lc.HumanMessage("Weather in Rome?"))
    assert text_of(said[-2]) == "According to get_weather: Cold in Rome."
