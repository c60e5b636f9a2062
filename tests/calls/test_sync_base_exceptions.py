"""What the application's own code raises that is not an ``Exception`` (``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit``, a ``BaseException`` of its own), raised in a tool or an event
handler that a synchronous form runs on metis's loop (metis/calls/background.py): it comes out
of the synchronous call as it was raised, and metis's loop serves the calls after it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import metis
from metis.sessions import RunEvent
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"
ASK = "What is the weather in Paris? Use the tool."


class Stop(BaseException):
    """An application's own BaseException (a worker's shutdown signal, say)."""


RAISED: list[Callable[[], BaseException]] = [KeyboardInterrupt, lambda: SystemExit(3), Stop]


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def _raising_tools(raised: BaseException) -> list[metis.Tool]:
    @metis.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise raised

    @metis.tool
    async def get_weather_async(city: str) -> str:
        """Current weather for a city."""
        raise raised

    return [get_weather, get_weather_async]


def _the_loop_serves_on(session: metis.Session) -> None:
    assert metis.complete(MODEL, "Hi").text
    assert not session.busy
    assert session.send("Hi").text  # the history left valid


@pytest.mark.parametrize("make", RAISED, ids=["KeyboardInterrupt", "SystemExit", "own"])
@pytest.mark.parametrize("which", [0, 1], ids=["plain_tool", "async_tool"])
def test_a_tools_base_exception_in_a_sync_run_comes_out_as_raised(
    at_emulator: Emulator, make: Callable[[], BaseException], which: int
) -> None:
    """Before: the exception ended metis's loop with it, and the next synchronous call was
    anyio's bare RuntimeError('This portal is not running')."""
    raised = make()
    session = metis.Session(MODEL, tools=[_raising_tools(raised)[which]])
    with pytest.raises(type(raised)) as caught:
        session.run(ASK)
    assert caught.value is raised
    _the_loop_serves_on(session)


@pytest.mark.parametrize("make", RAISED, ids=["KeyboardInterrupt", "SystemExit", "own"])
@pytest.mark.parametrize("which", [0, 1], ids=["plain_tool", "async_tool"])
def test_a_tools_base_exception_in_a_sync_stream_run_comes_out_as_raised(
    at_emulator: Emulator, make: Callable[[], BaseException], which: int
) -> None:
    """Before: the reader got a CancelledError (or waited for good), and the loop was gone."""
    raised = make()
    session = metis.Session(MODEL, tools=[_raising_tools(raised)[which]])
    with pytest.raises(type(raised)) as caught:
        for _ in session.stream_run(ASK):
            pass
    assert caught.value is raised
    _the_loop_serves_on(session)


@pytest.mark.parametrize("make", RAISED, ids=["KeyboardInterrupt", "SystemExit", "own"])
def test_an_event_handlers_base_exception_in_a_sync_run_comes_out_as_raised(
    at_emulator: Emulator, make: Callable[[], BaseException]
) -> None:
    raised = make()

    def on_event(event: metis.StreamEvent | RunEvent) -> None:
        raise raised

    session = metis.Session(MODEL)
    with pytest.raises(type(raised)) as caught:
        session.run("Hi", on_event=on_event)
    assert caught.value is raised
    _the_loop_serves_on(session)


@pytest.mark.parametrize("form", ["run", "arun"])
def test_a_stray_cancelled_error_of_a_tool_is_not_swallowed(
    at_emulator: Emulator, form: str
) -> None:
    """A tool that raises asyncio's CancelledError of its own (it awaited a task cancelled
    elsewhere), not the run's cancellation: before, the run went on as if the tool had been
    cancelled by it ('get_weather was cancelled before it finished' sent to the model) and
    ended complete, the error gone."""
    raised = asyncio.CancelledError("a task this tool awaited was cancelled")

    @metis.tool
    async def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise raised

    session = metis.Session(MODEL, tools=[get_weather])
    with pytest.raises(asyncio.CancelledError) as caught:
        if form == "run":
            session.run(ASK)
        else:
            asyncio.run(session.arun(ASK))
    assert caught.value is raised
    _the_loop_serves_on(session)
