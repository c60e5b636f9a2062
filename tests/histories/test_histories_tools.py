"""A tool list in OpenAI's or Anthropic's request form, read as ToolDefinitions: what each
form carries kept, what metis has no place for refused naming the tool and the field."""

from __future__ import annotations

from typing import Any

import pytest

from metis import InvalidRequestError, ToolDefinition
from metis.histories import from_anthropic_tools, from_openai_tools

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = ToolDefinition(name="get_weather", description="Weather.", input_schema=SCHEMA)


def test_openai_chat_and_responses_function_tools_are_read_alike() -> None:
    chat = {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather.", "parameters": SCHEMA},
    }
    responses = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather.",
        "parameters": SCHEMA,
        "strict": True,
    }
    read = from_openai_tools([chat, responses])
    assert read == [WEATHER, WEATHER.model_copy(update={"strict": True})]
    bare = from_openai_tools([{"type": "function", "function": {"name": "now"}}])
    assert bare == [ToolDefinition(name="now")]
    nulls = {"type": "function", "name": "now", "description": None, "parameters": None}
    assert from_openai_tools([nulls]) == [ToolDefinition(name="now")]


def test_anthropic_client_tools_are_read() -> None:
    tool = {"name": "get_weather", "description": "Weather.", "input_schema": SCHEMA}
    assert from_anthropic_tools([tool, {**tool, "type": "custom", "strict": False}]) == [
        WEATHER,
        WEATHER.model_copy(update={"strict": False}),
    ]


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        ({"type": "function"}, "tools: expected a list of tools, got dict"),
        (["get_weather"], "tools[0]: expected an object, got str"),
        ([{"type": "web_search"}], "tools[0].type: 'web_search': a provider's own tool is"),
        ([{"type": "custom", "custom": {"name": "x"}}], "metis.FreeformInput"),
        ([{"function": {"name": "x"}}], "tools[0].type: expected 'function', got NoneType"),
        (
            [{"type": "function", "function": {"name": "x", "parameter": {}}}],
            "tools[0].function.parameter: not a field of a tool metis reads",
        ),
        ([{"type": "function", "function": {"description": "x"}}], "function.name: missing"),
        ([{"type": "function", "function": {"name": ""}}], "tools[0].function.name"),
        (
            [{"type": "function", "name": "x", "parameters": "{}"}],
            "tools[0].parameters: expected an object, got str",
        ),
        (
            [{"type": "function", "name": "x", "strict": "yes"}],
            "tools[0].strict: expected true or false, got str",
        ),
    ],
)
def test_what_is_not_an_openai_function_tool_is_refused_naming_it(tools: Any, said: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        from_openai_tools(tools)
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ({"type": "web_search_20250305", "name": "web_search"}, "metis.WebSearch"),
        ({"name": "x", "cache_control": {"type": "ephemeral"}}, "cache policy (cache="),
        ({"name": "x", "input_schema": []}, "tools[0].input_schema: expected an object"),
        ({"name": "x", "parameters": {}}, "tools[0].parameters: not a field of a tool"),
        ({"input_schema": {}}, "tools[0].name: missing"),
    ],
)
def test_what_is_not_an_anthropic_client_tool_is_refused_naming_it(
    tool: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        from_anthropic_tools([tool])
    assert said in str(caught.value)
