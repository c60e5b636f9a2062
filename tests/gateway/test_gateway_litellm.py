"""The LiteLLM SDK as a client of ``metis serve``: ``litellm.completion`` with
``model="openai/<name>"`` (Chat Completions), ``"openai/responses/<name>"`` (the Responses API)
and ``"anthropic/<name>"`` (Messages), ``api_base`` the gateway, each answered by a model of
another family (emulator-backed): streamed and not, a tool over two turns, usage, and the
gateway's errors as LiteLLM's own exception types.

Slow, as the gateway's other clients beyond the official SDKs: LiteLLM is imported by a
fixture (about 2 s), never at collection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_url

pytestmark = pytest.mark.slow

TOOLS = [{"type": "function", "function": WEATHER_FUNCTION}]
MODELS = {
    # LiteLLM's provider route -> (its model name, the gateway's path)
    "openai-to-claude": ("openai/sonnet", "/v1"),
    "responses-to-gemini": ("openai/responses/flash", "/v1"),
    "anthropic-to-gpt": ("anthropic/gpt", ""),
}


@pytest.fixture(scope="module")
def litellm() -> Any:
    """LiteLLM (skipped where it is not installed), quiet about the gateway's model names,
    which its price list does not know."""
    module = pytest.importorskip("litellm")
    module.suppress_debug_info = True
    return module


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with gateway_url(Emulator()) as served:
        yield served


def ask(litellm: Any, url: str, kind: str, messages: list[Any], **more: Any) -> Any:
    model, path = MODELS[kind]
    base = {"api_base": url + path, "api_key": GATEWAY_KEY, "max_retries": 0}
    return litellm.completion(model=model, messages=messages, **{**base, **more})


def streamed(litellm: Any, url: str, kind: str, messages: list[Any], **more: Any) -> Any:
    """The stream's chunks put together by LiteLLM's own ``stream_chunk_builder``."""
    chunks = list(ask(litellm, url, kind, messages, stream=True, **more))
    assert len(chunks) > 2
    return litellm.stream_chunk_builder(chunks, messages=messages)


@pytest.mark.parametrize("kind", MODELS)
def test_completion_whole_and_streamed_with_usage(litellm: Any, url: str, kind: str) -> None:
    said = [{"role": "user", "content": "Hello there"}]
    whole = ask(litellm, url, kind, said)
    assert whole.choices[0].message.content == "You said: Hello there"
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens > 0
    options = {"stream_options": {"include_usage": True}}
    built = streamed(litellm, url, kind, said, **options)
    assert built.choices[0].message.content == "You said: Hello there"
    assert built.usage.completion_tokens == whole.usage.completion_tokens


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("kind", MODELS)
def test_a_tool_over_two_turns(litellm: Any, url: str, kind: str, stream: bool) -> None:
    said: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    send = streamed if stream else ask
    asked = send(litellm, url, kind, said, tools=TOOLS)
    assert asked.choices[0].finish_reason == "tool_calls"
    (call,) = asked.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert call.function.arguments.replace(" ", "") == '{"city":"Oslo"}'
    said += [
        asked.choices[0].message.model_dump(),
        {"role": "tool", "tool_call_id": call.id, "content": "Cold in Oslo"},
    ]
    answer = send(litellm, url, kind, said, tools=TOOLS)
    assert answer.choices[0].message.content == "According to get_weather: Cold in Oslo."


@pytest.mark.parametrize("kind", MODELS)
def test_errors_arrive_as_litellms_own(litellm: Any, url: str, kind: str) -> None:
    said = [{"role": "user", "content": "Hi"}]
    with pytest.raises(litellm.AuthenticationError):
        ask(litellm, url, kind, said, api_key="wrong")
    model, path = MODELS[kind]
    with pytest.raises(litellm.NotFoundError):
        litellm.completion(
            model=model.rsplit("/", 1)[0] + "/no-such-model",
            messages=said,
            api_base=url + path,
            api_key=GATEWAY_KEY,
            max_retries=0,
        )
