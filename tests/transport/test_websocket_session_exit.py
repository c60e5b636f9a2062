"""A session's block left while its turn's stream is held unclosed (a break or an error in the
loop over ``session.astream(...)``, a sync block left by an error with the stream in a
variable) cancels the turn (tests/sessions/test_session_exit_unclosed.py); on a WebSocket stack
the session's connection is released too, once the turn has ended, as a block left with no
turn in flight releases it: never kept open for a session its owner has left."""

from __future__ import annotations

import anyio
import pytest

from metis.adapter import Adapter
from metis.model import MessageComplete
from metis.sessions import Session
from metis.testing.emulator import Emulator

from ..session_helpers import DEADLINE
from .test_websocket_mode import session_on, transport_of, ws_adapter


class AppError(Exception):
    """The application's own failure, inside the loop over a turn's events."""


async def until_released(adapter: Adapter, session: Session) -> None:
    for _ in range(int(DEADLINE * 100)):  # the finalized stream's ending runs as its own task
        if not session.busy and not transport_of(adapter).holds(session.session_id):
            return
        await anyio.sleep(0.01)
    raise AssertionError("the turn never ended, or its connection was kept")


@pytest.mark.anyio
async def test_a_break_out_of_the_loop_over_a_turn_releases_the_connection(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator)
    session = session_on(adapter)
    try:
        async with session:
            async for event in session.astream("Hello there, how are you today?"):
                if isinstance(event, MessageComplete):  # the reply all in: nothing to cut
                    assert transport_of(adapter).holds(session.session_id)
                    break
        await until_released(adapter, session)
        assert (await session.asend("Again")).text == "You said: Again"  # a new connection
        assert transport_of(adapter).holds(session.session_id)
        await session.aclose()
    finally:
        await adapter.aclose()


@pytest.mark.anyio
async def test_an_error_in_the_loop_over_a_turn_releases_the_connection(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator)
    session = session_on(adapter)
    try:
        with pytest.raises(AppError):
            async with session:
                async for event in session.astream("Hello there, how are you today?"):
                    if isinstance(event, MessageComplete):
                        raise AppError("the application failed")
        await until_released(adapter, session)
    finally:
        await adapter.aclose()


def test_a_sync_block_left_by_an_error_with_its_stream_held_releases_the_connection(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator)
    session = session_on(adapter)
    with pytest.raises(AppError), session:
        events = session.stream("Hello there, how are you today?")
        read = iter(events)
        while not isinstance(next(read), MessageComplete):
            pass
        assert transport_of(adapter).holds(session.session_id)
        raise AppError("the application failed")
    del events, read  # the stream closed: its turn, cancelled, ends and releases the connection
    assert not session.busy
    assert not transport_of(adapter).holds(session.session_id)
    session.close()
