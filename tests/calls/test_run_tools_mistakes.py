"""run_tools and arun_tools given what is not a list of tools, or not a reply: the
classified error complete(tools=...) gives for the same mistake, never an AttributeError or
TypeError from inside."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import metis
from metis import InvalidRequestError, Message, ToolUseBlock


def get_weather(city: str) -> str:
    return f"18 degrees in {city}"


REPLY = Message(
    role="assistant",
    content=[ToolUseBlock(id="tu_1", name="get_weather", input={"city": "Paris"})],
)


def both(reply: Any, tools: Any) -> list[InvalidRequestError]:
    """The error of each of run_tools and arun_tools."""
    found = []
    with pytest.raises(InvalidRequestError) as sync:
        metis.run_tools(reply, tools)
    found.append(sync.value)
    with pytest.raises(InvalidRequestError) as async_:
        asyncio.run(metis.arun_tools(reply, tools))
    found.append(async_.value)
    return found


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        (None, "tools: expected a list of tools, got NoneType"),
        ("get_weather", "tools: expected a list of tools, got str"),
        (get_weather, "give tools=[get_weather]"),
        ({"get_weather": get_weather}, "tools: expected a list of tools, got dict"),
        ([None], "tools[0]: expected a @metis.tool function"),
        ([get_weather, 5], "tools[1]: expected a @metis.tool function"),
    ],
)
def test_tools_that_are_not_a_list_of_tools(tools: Any, said: str) -> None:
    for error in both(REPLY, tools):
        assert said in str(error)


@pytest.mark.parametrize("reply", [None, "the model's text", {"role": "assistant"}])
def test_a_reply_that_is_not_a_reply(reply: Any) -> None:
    for error in both(reply, [get_weather]):
        said = "reply: expected a CanonicalResponse, a stream's MessageComplete or an assistant"
        assert said in str(error)


def test_the_tools_given_right_still_run() -> None:
    [result] = metis.run_tools(REPLY, (get_weather,)).content
    assert result.content == "18 degrees in Paris"  # type: ignore[union-attr]


def test_the_list_given_to_complete_with_a_provider_tool_and_a_definition_runs() -> None:
    definition = metis.ToolDefinition(
        name="lookup", description="d", input_schema={"type": "object"}
    )
    [result] = metis.run_tools(REPLY, [get_weather, metis.WebSearch(), definition]).content
    assert result.content == "18 degrees in Paris"  # type: ignore[union-attr]
