"""A Messages or Responses client's tool loop with Gemini 3 keeps the model's thought
signatures: those APIs have no place for a call's signature, so the gateway keeps each in its
store under the call's id (in memory, or in Redis, where any replica finds it) and gives it
back when the client sends the call again. The call went back without it, and Gemini got
Google's bypass value in its place (which it takes at the cost of the model's reasoning; a
call with neither it refuses)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.gateway.call_signatures import RedisCallSignatures
from metis.testing.emulator import Emulator
from tests.gateway_fixture import (
    GATEWAY_KEY,
    WEATHER_FUNCTION,
    WEATHER_MESSAGES_TOOL,
    gateway_config,
    serving,
)

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
BYPASS = "skip_thought_signature_validator"
THREE = {"gemini:gemini-3-pro-preview": {"adapter": "gemini", "aliases": ["g3"]}}
ASKED: Any = [{"role": "user", "content": "What is the weather in Oslo?"}]
ANSWER = "According to get_weather: cold."


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Emulator]]:
    emulator = Emulator()
    with serving(create_app(gateway_config(emulator, models=THREE))) as (url, _):
        yield url, emulator


def _sent_signature(emulator: Emulator) -> Any:
    """The thought signature of the call the last request to Gemini sent back."""
    contents = emulator.bodies("gemini")[-1]["contents"]
    part = next(p for c in contents for p in c["parts"] if "functionCall" in p)
    return part.get("thoughtSignature")


def _claude(url: str) -> Any:
    return anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)


def _messages_turn(claude: Any, streamed: bool) -> list[Any]:
    """The first turn (a call), as the client sends it back with the call's result."""
    asked = {"model": "g3", "max_tokens": 500, "messages": ASKED, "tools": [WEATHER_MESSAGES_TOOL]}
    if streamed:
        with claude.messages.stream(**asked) as stream:
            first = stream.get_final_message()
    else:
        first = claude.messages.create(**asked)
    call = next(block for block in first.content if block.type == "tool_use")
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "cold"}
    content = [block.model_dump(exclude_none=True) for block in first.content]
    return [
        *ASKED,
        {"role": "assistant", "content": content},
        {"role": "user", "content": [result]},
    ]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_messages_client_s_call_goes_back_to_gemini_with_its_signature(
    served: tuple[str, Emulator], streamed: bool
) -> None:
    url, emulator = served
    claude = _claude(url)
    turns = _messages_turn(claude, streamed)
    answer = claude.messages.create(
        model="g3", max_tokens=500, messages=turns, tools=[WEATHER_MESSAGES_TOOL]
    )
    assert answer.content[-1].text == ANSWER
    assert _sent_signature(emulator) not in (BYPASS, None)


def _responses_turn(oai: Any, streamed: bool) -> list[Any]:
    """The first turn, as a client that keeps its own state (``store: false``, Codex CLI)
    sends it back: the output items and the call's output."""
    asked = {"model": "g3", "input": ASKED, "tools": [{"type": "function", **WEATHER_FUNCTION}]}
    if streamed:
        with oai.responses.stream(**asked, store=False) as stream:
            first = stream.get_final_response()
    else:
        first = oai.responses.create(**asked, store=False)
    call = next(item for item in first.output if item.type == "function_call")
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "cold"}
    return [*ASKED, *[item.model_dump(exclude_none=True) for item in first.output], output]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_responses_client_s_call_goes_back_to_gemini_with_its_signature(
    served: tuple[str, Emulator], streamed: bool
) -> None:
    url, emulator = served
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
    items = _responses_turn(oai, streamed)
    tools = [{"type": "function", **WEATHER_FUNCTION}]
    answer = oai.responses.create(model="g3", input=items, tools=tools, store=False)
    assert answer.output_text == ANSWER
    assert _sent_signature(emulator) not in (BYPASS, None)


def _gpt(url: str) -> Any:
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)


CHAT_TOOLS: Any = [{"type": "function", "function": WEATHER_FUNCTION}]


def _chat_turn(oai: Any, streamed: bool) -> list[Any]:
    """The first turn, as most Chat clients send it back: the call's id, name and arguments
    alone, its ``extra_content`` (where the gateway put its signature) dropped."""
    asked = {"model": "g3", "messages": ASKED, "tools": CHAT_TOOLS}
    if streamed:
        with oai.chat.completions.stream(**asked) as stream:
            first = stream.get_final_completion()
    else:
        first = oai.chat.completions.create(**asked)
    (call,) = first.choices[0].message.tool_calls
    assert call.model_extra.get("extra_content")  # handed out, then stripped by the client
    function = {"name": call.function.name, "arguments": call.function.arguments}
    stripped = {"id": call.id, "type": "function", "function": function}
    return [
        *ASKED,
        {"role": "assistant", "content": None, "tool_calls": [stripped]},
        {"role": "tool", "tool_call_id": call.id, "content": "cold"},
    ]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_chat_client_that_drops_extra_content_gives_gemini_its_signature(
    served: tuple[str, Emulator], streamed: bool
) -> None:
    url, emulator = served
    oai = _gpt(url)
    turns = _chat_turn(oai, streamed)
    answer = oai.chat.completions.create(model="g3", messages=turns, tools=CHAT_TOOLS)
    assert answer.choices[0].message.content == ANSWER
    assert _sent_signature(emulator) not in (BYPASS, None)


def test_a_signature_kept_by_one_gateway_is_given_back_by_another(redis_url: str) -> None:
    """Two gateways over one Redis: the call made through one goes back with its signature
    through the other (a Messages client's, and a Chat client's that dropped it)."""
    emulator = Emulator()
    config = {"redis_url": redis_url}
    one = create_app(gateway_config(emulator, config, models=THREE))
    two = create_app(gateway_config(emulator, config, models=THREE))
    with serving(one) as (first, _), serving(two) as (second, _):
        turns = _messages_turn(_claude(first), streamed=False)
        answer = _claude(second).messages.create(
            model="g3", max_tokens=500, messages=turns, tools=[WEATHER_MESSAGES_TOOL]
        )
        assert answer.content[-1].text == ANSWER
        assert _sent_signature(emulator) not in (BYPASS, None)
        chat = _chat_turn(_gpt(first), streamed=False)
        said = _gpt(second).chat.completions.create(model="g3", messages=chat, tools=CHAT_TOOLS)
    assert said.choices[0].message.content == ANSWER
    assert _sent_signature(emulator) not in (BYPASS, None)


def test_a_call_the_gateway_kept_no_signature_for_goes_as_before(
    served: tuple[str, Emulator],
) -> None:
    """A call id the gateway did not hand out (or whose signature it no longer keeps) goes to
    Gemini with the bypass, as a foreign call does."""
    url, emulator = served
    call = {"type": "tool_use", "id": "tu_01JZZZZZZZZZZZZZZZZZZZZZZZ", "name": "get_weather"}
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": "cold"}
    turns = [
        *ASKED,
        {"role": "assistant", "content": [{**call, "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [result]},
    ]
    _claude(url).messages.create(
        model="g3", max_tokens=500, messages=turns, tools=[WEATHER_MESSAGES_TOOL]
    )
    assert _sent_signature(emulator) == BYPASS


class _Down:
    """A Redis client whose every command fails, as one that does not answer."""

    async def set(self, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("redis is down")

    async def mget(self, *args: Any) -> None:
        raise ConnectionError("redis is down")


@pytest.mark.anyio
async def test_a_redis_that_fails_costs_the_signatures_not_the_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Keeping or finding them fails logged, and the calls go as before (the bypass): the
    request is not refused for what only improves it."""
    store = RedisCallSignatures(_Down(), 60)
    await store.keep("", {"tu_1": "metis1.x.y"})
    assert await store.find("", ["tu_1"]) == {}
    events = [getattr(record, "event", None) for record in caplog.records]
    assert events.count("metis.gateway.store_failed") == 2
