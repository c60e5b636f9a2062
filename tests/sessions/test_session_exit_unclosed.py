"""A session's block left while the stream of its turn was never closed (an error or a break
in the loop over ``session.astream(...)``, which leaves the stream to the event loop to
finalize): the application's own error goes on out, never replaced by a SessionBusyError
from the block's exit, and the turn is cancelled, so it ends as soon as the stream is
finalized."""

from __future__ import annotations

import itertools

import anyio
import pytest

from metis.model import MessageStart, TextDelta
from metis.sessions import Session
from metis.testing.emulator import Emulator

from ..fakes import FakePeer
from ..session_helpers import close_all, emulated
from .test_sessions import stalled_reply

CLAUDE = "anthropic:claude-sonnet-4-5"


class AppError(Exception):
    """The application's own failure, inside the loop over a turn's events."""


async def until_the_turn_ended(session: Session) -> None:
    """Waits for the turn's end itself (the finalized stream's ending runs as a task of its
    own), however long the machine's load makes it; the bound is only a guard against a hang."""
    with anyio.fail_after(60):
        for _ in itertools.count():
            if session._control is None:
                return
            await anyio.sleep(0.01)


@pytest.mark.anyio
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


@pytest.mark.anyio
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


def test_a_sync_block_left_by_an_error_while_its_stream_is_held_raises_that_error() -> None:
    peer = FakePeer(stalled_reply("Hello", " there"))  # the stream never ends by itself
    session = Session(CLAUDE, adapters={"anthropic": peer.adapter("anthropic", max_retries=0)})
    with pytest.raises(AppError), session:
        events = session.stream("Hello there, how are you today?")
        assert isinstance(next(iter(events)), MessageStart)
        raise AppError("the application failed")
    del events  # the stream closed: its turn, cancelled, ends with what arrived
    assert session.cancel() is False
    assert [message.role.value for message in session.messages] in (["user", "assistant"], [])
