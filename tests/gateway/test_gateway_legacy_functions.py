"""Deprecated Chat function calling (``functions``, ``function_call``, ``role: function``) is
read as tools, as OpenAI still takes it: the reply's call comes back as ``function_call``,
streamed and not, and the function's result goes to the model that is asked next."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.gateway.chat_api import read_chat
from metis.histories.openai_chat import from_openai_chat
from metis.model.content import ToolResultBlock, ToolUseBlock
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_url

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")

WEATHER = WEATHER_FUNCTION
ASKED = [{"role": "user", "content": "Weather in Rome?"}]


@pytest.fixture(scope="module")
def oai(emulator: Emulator) -> Iterator[Any]:
    with gateway_url(emulator) as url:
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)


def test_a_legacy_function_call_over_two_turns_and_two_models(oai: Any) -> None:
    first = oai.chat.completions.create(
        model="sonnet", messages=ASKED, functions=[WEATHER], function_call="auto"
    )
    choice = first.choices[0]
    assert choice.finish_reason == "function_call" and choice.message.tool_calls is None
    call = choice.message.function_call
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Rome"}
    turns = [
        *ASKED,
        {"role": "assistant", "content": None, "function_call": call.model_dump()},
        {"role": "function", "name": "get_weather", "content": "Sunny, 24 C"},
    ]
    reply = oai.chat.completions.create(model="flash", messages=turns, functions=[WEATHER])
    assert "Sunny, 24 C" in reply.choices[0].message.content


def test_a_streamed_legacy_function_call(oai: Any) -> None:
    chunks = list(
        oai.chat.completions.create(
            model="flash",
            messages=ASKED,
            functions=[WEATHER],
            function_call={"name": "get_weather"},
            stream=True,
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert all(d.tool_calls is None for d in deltas)
    calls = [d.function_call for d in deltas if d.function_call is not None]
    assert calls[0].name == "get_weather"
    assert json.loads("".join(c.arguments or "" for c in calls)) == {"city": "Rome"}
    assert chunks[-1].choices[0].finish_reason == "function_call"


def test_the_reader_pairs_each_function_result_with_its_call() -> None:
    messages = from_openai_chat(
        [
            *ASKED,
            {"role": "assistant", "function_call": {"name": "f", "arguments": '{"a": 1}'}},
            {"role": "function", "name": "f", "content": "done"},
        ]
    )
    used, result = messages[1].content[0], messages[2].content[0]
    assert isinstance(used, ToolUseBlock) and isinstance(result, ToolResultBlock)
    assert used.input == {"a": 1} and result.tool_use_id == used.id


def test_functions_read_as_tools_and_not_beside_them() -> None:
    body = {"model": "m", "messages": ASKED, "functions": [WEATHER], "function_call": "none"}
    inbound = read_chat(body)
    assert [t.name for t in inbound.fields["tools"]] == ["get_weather"]
    assert inbound.fields["tool_choice"].type == "none" and inbound.ignored == []
    tool = {"type": "function", "function": WEATHER}
    with pytest.raises(InvalidRequestError, match="not both"):
        read_chat({**body, "tools": [tool]})


UNPAIRED = [
    {"role": "system", "content": "Use the result given."},
    *ASKED,
    {"role": "function", "name": "get_weather", "content": "Sunny, 24 C"},
]
"""A function's result with no ``function_call`` before it, as LangGraph and older clients
send it (a ``FunctionMessage``): OpenAI takes it."""


def test_the_reader_keeps_a_function_result_with_no_call_as_the_users_text() -> None:
    """A ``role: function`` message no ``function_call`` asked for is the function's result
    as text (every API the canonical form is written in pairs a tool result with its call),
    not a 400; one with a call before it is still that call's result."""
    messages = from_openai_chat(UNPAIRED)
    assert [m.role.value for m in messages] == ["system", "user", "user"]
    assert messages[2].text == '<tool_result name="get_weather">Sunny, 24 C</tool_result>'
    paired = from_openai_chat(
        [
            *ASKED,
            {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
            {"role": "function", "name": "f", "content": "done"},
            {"role": "function", "name": "f", "content": [{"type": "text", "text": "again"}]},
        ]
    )
    assert isinstance(paired[2].content[0], ToolResultBlock)
    assert paired[3].text == '<tool_result name="f">again</tool_result>'


@pytest.mark.parametrize(
    ("model", "family"),
    [("flash", "gemini"), ("sonnet", "anthropic"), ("haiku", "bedrock"), ("gpt", "openai")],
)
def test_a_function_result_with_no_call_reaches_every_model(
    oai: Any, emulator: Emulator, model: str, family: str
) -> None:
    """Through the openai SDK: Gemini, Claude and Bedrock get the result as the user's text
    (the gateway refused the request, 400), gpt as the client wrote it (passed through)."""
    raw = oai.chat.completions.with_raw_response.create(
        model=model, messages=UNPAIRED, functions=[WEATHER]
    )
    assert raw.parse().choices[0].message is not None
    sent = json.dumps(emulator.bodies(family)[-1])
    assert "Sunny, 24 C" in sent
    if family == "openai":
        assert raw.headers["x-metis-path"] == "pass-through"
        assert emulator.bodies(family)[-1]["messages"][-1] == UNPAIRED[-1]
    else:
        assert '<tool_result name=\\"get_weather\\">Sunny, 24 C</tool_result>' in sent
