"""A stream left early keeps, as the turn's reply, exactly the text its caller was given: the
synchronous form (whose events cross from metis's loop to the caller's thread) as the async
form does."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from metis.model import TextDelta
from metis.sessions import Session

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
