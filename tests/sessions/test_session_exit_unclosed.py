"""A session's block left while the stream of its turn was never closed (an error or a break
in the loop over ``session.astream(...)``, which leaves the stream to the event loop to
finalize): the application's own error goes on out, never replaced by a SessionBusyError
from the block's exit, and the turn is cancelled, so it ends as soon as the stream is
finalized."""

from __future__ import annotations

import anyio
import pytest

from metis.model import TextDelta
from metis.sessions import Session
from metis.testing.emulator import Emulator

from ..session_helpers import close_all, emulated

pytestmark = pytest.mark.anyio
CLAUDE = "anthropic:claude-sonnet-4-5"


class AppError(Exception):
    """The application's own failure, inside the loop over a turn's events."""


async def until_the_turn_ended(session: Session) -> None:
    for _ in range(500):  # the finalized stream's ending runs as a task of its own
        if session._control is None:
            return
        await anyio.sleep(0.01)
    raise AssertionError("the turn never ended")


async def test_an_error_in_the_loop_over_a_turn_leaves_the_block_as_itself(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(CLAUDE, adapters=adapters)
    with pytest.raises(AppError):
        async with session:
            async for _ in session.astream("Hello there, how are you today?"):
                raise AppError("the application failed")
    await until_the_turn_ended(session)
    assert (await session.asend("Again")).text == "You said: Again"
    await close_all(adapters)


async def test_a_break_out_of_the_loop_over_a_turn_leaves_the_block_quietly(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(CLAUDE, adapters=adapters)
    async with session:
        async for event in session.astream("Hello there, how are you today?"):
            if isinstance(event, TextDelta):
                break
    await until_the_turn_ended(session)
    assert [message.role.value for message in session.messages] == ["user", "assistant"]
    assert "You said: Hello there, how are you today?".startswith(session.messages[1].text)
    assert (await session.asend("Again")).text == "You said: Again"
    await close_all(adapters)
