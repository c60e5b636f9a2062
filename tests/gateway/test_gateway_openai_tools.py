"""OpenAI clients' tool choices and custom tools through the gateway
(metis.gateway.openai_tools): ``allowed_tools`` narrows the tools sent, a hosted tool as the
choice is left out and reported, Responses' custom tools are read with their flat grammar;
through the gateway the official SDK's requests reach another provider with only the allowed
tools."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.gateway.chat_api import read_chat
from metis.gateway.responses_read import read_responses
from metis.model.request import FreeformInput, ToolChoice
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")

PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": PARAMETERS}}
    for name in ("get_weather", "get_time", "get_news")
]
RESPONSES_TOOLS = [{"type": "function", "name": t["function"]["name"]} for t in CHAT_TOOLS]
ASKED = [{"role": "user", "content": "Weather in Rome?"}]


def chat(choice: Any, tools: list[Any] = CHAT_TOOLS) -> Any:
    return read_chat({"model": "m", "messages": ASKED, "tools": tools, "tool_choice": choice})


def responses(choice: Any, tools: list[Any] = RESPONSES_TOOLS) -> Any:
    return read_responses({"model": "m", "input": "Hi", "tools": tools, "tool_choice": choice})


def names(inbound: Any) -> list[str]:
    return [tool.name for tool in inbound.fields["tools"]]


@pytest.mark.parametrize(("mode", "kind"), [("auto", "auto"), ("required", "any")])
def test_chat_allowed_tools_narrow_the_tools_sent(mode: str, kind: str) -> None:
    allowed = [{"type": "function", "function": {"name": n}} for n in ("get_time", "get_news")]
    inbound = chat({"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}})
    assert names(inbound) == ["get_time", "get_news"]
    assert inbound.fields["tool_choice"] == ToolChoice(type=kind)
    assert inbound.ignored == []


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("any", ToolChoice.any()),
        ({"type": "tool", "name": "get_time"}, ToolChoice.tool("get_time")),
        ({"function": {"name": "get_news"}}, ToolChoice.tool("get_news")),
    ],
)
def test_chat_dialects_forced_choices_are_read_as_forced(choice: Any, expected: Any) -> None:
    # Mistral's "any" (0xPlaygrounds/rig's mistral cassettes, magentic's), xAI's and MiniMax's
    # {type: tool, name} (vkryukov/req_llm's tool_round_trip fixtures), Hugging Face's
    # {function: {name}} without a type (pydantic-ai's tool_choice_matrix): each was answered 200
    inbound = chat(choice)
    assert inbound.fields["tool_choice"] == expected
    assert inbound.ignored == []


def test_responses_allowed_tools_keep_function_and_custom_tools_and_skip_hosted_ones() -> None:
    tools = [*RESPONSES_TOOLS, {"type": "custom", "name": "run_sql"}]
    allowed = [
        {"type": "function", "name": "get_weather"},
        {"type": "custom", "name": "run_sql"},
        {"type": "web_search_preview"},
    ]
    inbound = responses({"type": "allowed_tools", "mode": "required", "tools": allowed}, tools)
    assert names(inbound) == ["get_weather", "run_sql"]
    assert inbound.fields["tool_choice"] == ToolChoice.any()


def test_a_hosted_tool_as_the_choice_is_left_out_and_reported() -> None:
    inbound = responses({"type": "web_search_preview"})
    assert "tool_choice" not in inbound.fields and names(inbound) == [
        "get_weather",
        "get_time",
        "get_news",
    ]
    assert "tool_choice (web_search_preview)" in inbound.ignored
    only_hosted = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "file_search"}]}
    inbound = responses(only_hosted)
    assert "tool_choice" not in inbound.fields and len(names(inbound)) == 3
    assert "tool_choice (allowed_tools: hosted tools only)" in inbound.ignored


def test_responses_custom_tools_and_their_choice_are_read() -> None:
    grammar = {"type": "grammar", "syntax": "lark", "definition": "start: /[0-9]+/"}
    tools = [
        {"type": "custom", "name": "digits", "description": "Digits.", "format": grammar},
        {"type": "custom", "name": "free"},
    ]
    inbound = responses({"type": "custom", "name": "digits"}, tools)
    digits, free = inbound.fields["tools"]
    assert digits.freeform == FreeformInput(syntax="lark", definition="start: /[0-9]+/")
    assert digits.description == "Digits." and free.freeform == FreeformInput()
    assert inbound.fields["tool_choice"] == ToolChoice.tool("digits")


@pytest.mark.parametrize(
    ("read", "choice", "message"),
    [
        (chat, {"type": "allowed_tools", "allowed_tools": {"mode": "some"}}, "mode"),
        (chat, {"type": "allowed_tools", "allowed_tools": {"mode": "auto"}}, "tools"),
        (
            chat,
            {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "auto", "tools": [{"type": "function"}]},
            },
            r"tools\[0\]\.function\.name",
        ),
        (
            responses,
            {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "x"}]},
            "names none of",
        ),
        (responses, {"name": "get_weather"}, "tool_choice: expected"),
        (responses, "any", "tool_choice: expected"),
        (chat, "some", "tool_choice: expected"),
        (chat, {"type": "tool"}, "tool_choice: expected"),
        (responses, {"type": "custom"}, "tool_choice: expected"),
    ],
)
def test_a_malformed_choice_is_an_invalid_request(read: Any, choice: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        read(choice)


def test_a_grammar_without_a_definition_is_an_invalid_request() -> None:
    tool = {"type": "custom", "name": "x", "format": {"type": "grammar", "syntax": "lark"}}
    with pytest.raises(InvalidRequestError, match=r"tools\[0\]\.format"):
        responses(None, [tool])


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, Emulator]]:
    emulator = Emulator()
    with gateway_url(emulator) as url:
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0), emulator


def test_an_sdk_s_allowed_tools_reach_another_provider_as_the_allowed_tools(
    served: tuple[Any, Emulator],
) -> None:
    client, emulator = served
    allowed = {
        "mode": "required",
        "tools": [{"type": "function", "function": {"name": "get_weather"}}],
    }
    reply = client.chat.completions.create(
        model="sonnet",
        messages=ASKED,
        tools=CHAT_TOOLS,
        tool_choice={"type": "allowed_tools", "allowed_tools": allowed},
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    sent = json.loads(emulator.requests[-1].body)
    assert emulator.requests[-1].path == "/v1/messages"
    assert [tool["name"] for tool in sent["tools"]] == ["get_weather"]
    assert sent["tool_choice"]["type"] == "any"


def test_a_responses_client_s_hosted_tool_choice_is_reported_not_refused(
    served: tuple[Any, Emulator],
) -> None:
    client, _ = served
    raw = client.responses.with_raw_response.create(
        model="sonnet",
        input="Weather in Rome?",
        tools=RESPONSES_TOOLS,
        tool_choice={"type": "file_search"},
    )
    assert "tool_choice (file_search)" in raw.headers["x-metis-dropped"]
    assert raw.parse().status == "completed"
