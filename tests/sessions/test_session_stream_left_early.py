"""A stream left early keeps, as the turn's reply, exactly the text its caller was given: the
synchronous form (whose events cross from metis's loop to the caller's thread) as the async
form does."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from metis.model import TextDelta
from metis.sessions import Session, SessionBusyError

from ..fakes import FakePeer, anthropic_reply

PIECES = [f"w{i} " for i in range(40)]  # more than the synchronous form ever read ahead


def _session() -> tuple[Session, FakePeer]:
    peer = FakePeer(anthropic_reply(*PIECES))
    adapters = {"anthropic": peer.adapter("anthropic", max_retries=0)}
    return Session("anthropic:claude-sonnet-4-5", adapters=adapters), peer


def _left_after_three_texts_async() -> tuple[Session, list[str]]:
    session, _ = _session()
    given: list[str] = []

    async def read() -> None:
        async with session.astream("Hi") as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    given.append(event.text)
                    if len(given) == 3:
                        break

    anyio.run(read)
    return session, given


def _left_after_three_texts_sync() -> tuple[Session, list[str]]:
    session, _ = _session()
    given: list[str] = []
    for event in session.stream("Hi"):
        if isinstance(event, TextDelta):
            given.append(event.text)
            if len(given) == 3:
                break
    return session, given


@pytest.mark.parametrize(
    "left", [_left_after_three_texts_async, _left_after_three_texts_sync], ids=["async", "sync"]
)
def test_a_stream_left_early_keeps_what_its_caller_was_given(
    left: Callable[[], tuple[Session, list[str]]],
) -> None:
    session, given = left()
    assert given == PIECES[:3]
    assert [m.text for m in session.messages] == ["Hi", "".join(PIECES[:3])]
    assert not session.busy


def _session_of(*replies: list[str]) -> Session:
    peer = FakePeer(*(anthropic_reply(*pieces) for pieces in replies))
    adapters = {"anthropic": peer.adapter("anthropic", max_retries=0)}
    return Session("anthropic:claude-sonnet-4-5", adapters=adapters)


@pytest.mark.anyio
async def test_a_stream_left_with_break_outside_async_with_lets_the_next_turn_go_on() -> None:
    """``async for event in session.astream(...): break``, then the next turn: it was a
    SessionBusyError (the dropped stream's turn ends only when the event loop finalizes it);
    the next turn now waits for that, and the history keeps what the caller was given."""
    session = _session_of(PIECES, ["Fine."])
    async for event in session.astream("Hi"):
        if isinstance(event, TextDelta):
            break
    reply = await session.asend("Again")
    assert reply.text == "Fine."
    assert [m.text for m in session.messages] == ["Hi", PIECES[0], "Again", "Fine."]


@pytest.mark.anyio
async def test_a_run_left_with_break_lets_the_next_run_go_on() -> None:
    session = _session_of(PIECES, ["Fine."])
    async for event in session.astream_run("Hi"):
        if isinstance(event, TextDelta):
            break
    result = await session.arun("Again")
    assert result.text == "Fine."


@pytest.mark.anyio
async def test_a_stream_its_caller_still_holds_keeps_the_session_busy() -> None:
    """A stream not dropped may still be read: the next turn is refused, saying how to leave
    a stream early, and goes on once the stream is closed."""
    session = _session_of(PIECES, ["Fine."])
    events = session.astream("Hi")
    async for event in events:
        if isinstance(event, TextDelta):
            break
    with pytest.raises(SessionBusyError, match=r"async with session\.astream"):
        await session.asend("Again")
    await events.aclose()
    assert (await session.asend("Again")).text == "Fine."
