"""A session's arguments of the wrong kind are refused, each with a ConfigError saying what
is expected, where they were taken and failed later (a session id that is not a string, at
its first save), or met as a bare TypeError (options that are not a mapping), or quietly
changed what a run does (a tool timeout of -1 s answered every tool call as timed out)."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import anyio
import pytest

import metis
from metis.errors import ConfigError
from metis.model import Message, Role, ToolUseBlock
from metis.sessions import Session
from metis.tools import arun_tools

CLAUDE = "anthropic:claude-sonnet-4-5"


@pytest.mark.parametrize("session_id", [5, b"ses_1", ["a"]])
def test_a_session_id_that_is_not_a_string_is_refused(session_id: Any) -> None:
    with pytest.raises(ConfigError, match="session_id is a string"):
        Session(CLAUDE, session_id=session_id)


@pytest.mark.parametrize("options", [5, "temperature=0.2", [("temperature", 0.2)]])
def test_options_that_are_not_a_mapping_are_refused(options: Any) -> None:
    session = Session(CLAUDE, temperature=0.2)
    with pytest.raises(ConfigError, match=r"Session\.options is a mapping"):
        session.options = options
    assert session.options == {"temperature": 0.2}


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o.__setitem__("temperature", 0.9),
        lambda o: o.update(temperature=0.9),
        lambda o: o.pop("temperature"),
        lambda o: o.setdefault("top_p", 0.5),
        lambda o: o.clear(),
        lambda o: o.__delitem__("temperature"),
    ],
)
def test_a_change_made_to_the_options_read_is_refused_not_lost(change: Any) -> None:
    """session.options['temperature'] = 0.9 did nothing (the options read are a copy) and
    said nothing; it is refused, saying how to set them."""
    session = Session(CLAUDE, temperature=0.2)
    with pytest.raises(ConfigError, match=r"session\.options = \{\*\*session\.options, "):
        change(session.options)
    assert session.options == {"temperature": 0.2}
    mine = dict(session.options)  # a copy of one's own is a plain dict
    mine["temperature"] = 0.9
    assert copy.deepcopy(session.options) == {"temperature": 0.2}
    assert type(pickle.loads(pickle.dumps(session.options))) is dict
    session.options = {**session.options, "temperature": 0.9}
    assert session.options == {"temperature": 0.9} == mine


@metis.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


BAD_TIMEOUTS = [-1, 0, math.nan, math.inf, "5", True]


@pytest.mark.anyio
@pytest.mark.parametrize("seconds", BAD_TIMEOUTS)
async def test_a_tool_timeout_that_is_not_seconds_is_refused(seconds: Any) -> None:
    session = Session(CLAUDE, tools=[get_weather])
    with pytest.raises(ConfigError, match="tool_timeout_seconds"):
        await session.arun("Weather in Paris?", tool_timeout_seconds=seconds)
    assert session.messages == []  # refused before anything was sent or kept
    call = ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"})
    with pytest.raises(ConfigError, match="tool_timeout_seconds"):
        await arun_tools(
            Message(role=Role.ASSISTANT, content=[call]), [get_weather], timeout_seconds=seconds
        )


@pytest.mark.anyio
async def test_a_tool_timeout_of_seconds_still_runs_the_tool() -> None:
    """An async tool that answers without awaiting gives the timeout no point to cancel it
    at, so the answer cannot depend on how loaded the machine is (a plain tool would run in
    a worker thread, which a loaded machine may start after the 2.5 s)."""

    @metis.tool(name="get_weather")
    async def answer_at_once(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    call = ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"})
    with anyio.fail_after(30):
        result = await arun_tools(
            Message(role=Role.ASSISTANT, content=[call]), [answer_at_once], timeout_seconds=2.5
        )
    assert result.content[0].content == "sunny in Paris"


@pytest.mark.parametrize(
    ("adapters", "said"),
    [
        ("anthropic", "adapters is a mapping of stack names to Adapters, got str"),
        ([("anthropic", 5)], "adapters is a mapping of stack names to Adapters, got list"),
        ({"anthropic": 5}, "adapters['anthropic'] is an Adapter, got int"),
    ],
)
def test_adapters_that_are_not_adapters_by_stack_are_refused(adapters: Any, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Session(CLAUDE, adapters=adapters)
    assert said in str(caught.value)


@pytest.mark.parametrize("max_steps", ["3", None, 2.5, True])
def test_max_steps_that_is_not_a_whole_number_is_refused(max_steps: Any) -> None:
    session = Session(CLAUDE)
    with pytest.raises(ConfigError, match="max_steps is a whole number, at least 1"):
        session.run("Hi", max_steps=max_steps)
    with pytest.raises(ConfigError, match="max_steps is a whole number, at least 1"):
        session.astream_run("Hi", max_steps=max_steps)
