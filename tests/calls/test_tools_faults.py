"""Tools that misbehave: each becomes a tool result the model can read, never an exception in
the application nor a result that is not what the tool answered."""

from __future__ import annotations

import functools
import logging
import warnings

import pytest

import metis
from metis.model import Message, Role, ToolResultBlock, ToolUseBlock
from metis.tools import Tool, arun_tools, run_tools


async def _suffixed(word: str, suffix: str) -> str:
    """Add a suffix."""
    return word + suffix


def looked_up(word: str):  # type: ignore[no-untyped-def]
    """A plain function handing back its async helper's coroutine."""
    return _suffixed(word, "!")


def _calling(name: str) -> Message:
    call = ToolUseBlock(id="call_1", name=name, input={"word": "tea"})
    return Message(role=Role.ASSISTANT, content=[call])


@pytest.mark.anyio
async def test_a_plain_function_returning_a_coroutine_is_awaited_for_its_answer() -> None:
    lookup = Tool.from_function(looked_up, name="lookup")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no coroutine left unawaited
        result = (await arun_tools(_calling("lookup"), [lookup])).content[0]
    assert not result.is_error and result.content == "tea!"


@pytest.mark.anyio
async def test_a_partial_of_an_async_function_is_awaited() -> None:
    lookup = Tool.from_function(functools.partial(_suffixed, suffix="?"), name="lookup")
    result = (await arun_tools(_calling("lookup"), [lookup])).content[0]
    assert not result.is_error and result.content == "tea?"


def test_run_tools_refuses_a_coroutine_without_leaving_it_unawaited() -> None:
    lookup = Tool.from_function(looked_up, name="lookup")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = run_tools(_calling("lookup"), [lookup]).content[0]
        import gc

        gc.collect()  # an unawaited coroutine warns when it is collected
    assert result.is_error and "arun_tools" in str(result.content)


class Stop(BaseException):
    """What an application raises to leave everything at once (not an Exception)."""


async def _leaving(word: str) -> str:
    """Leave."""
    raise Stop(word)


@pytest.mark.anyio
async def test_a_tool_raising_a_base_exception_leaves_arun_tools_as_itself() -> None:
    # before: a BaseExceptionGroup of arun_tools' task group, which `except Stop` misses
    with pytest.raises(Stop, match="tea"):
        await arun_tools(_calling("_leaving"), [Tool.from_function(_leaving)])


def _lookup_city(word: str) -> str:
    """Look a city up."""
    raise metis.ToolError(f"no city named {word!r}; try a capital")


@pytest.mark.anyio
@pytest.mark.parametrize("runner", ["sync", "async"])
async def test_a_tool_error_is_its_message_to_the_model_and_no_warning(
    runner: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool telling the model it asked for something that does not exist (an expected
    answer, as pydantic-ai's ModelRetry is) was a WARN with a traceback in the application's
    log on every call, and its text prefixed with the exception's class: metis.ToolError's
    message is the is_error result as written, logged at DEBUG only."""
    lookup = Tool.from_function(_lookup_city, name="lookup")
    caplog.set_level(logging.DEBUG, logger="metis")
    if runner == "sync":
        message = run_tools(_calling("lookup"), [lookup])
    else:
        message = await arun_tools(_calling("lookup"), [lookup])
    result = message.content[0]
    assert isinstance(result, ToolResultBlock) and result.is_error
    assert result.content == "no city named 'tea'; try a capital"
    records = [r for r in caplog.records if getattr(r, "event", None) == "metis.tool_failed"]
    assert [r.levelno for r in records] == [logging.DEBUG]
    assert issubclass(metis.ToolError, Exception)
