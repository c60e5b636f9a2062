"""The synchronous streams (metis.stream, Session.stream, Session.stream_run) close at the end
of a ``with`` block, as the async session streams do at the end of ``async with``."""

from __future__ import annotations

import pytest

import metis
from metis.model import Role
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def test_a_session_stream_left_in_a_with_block_ends_its_turn_there(at_emulator: Emulator) -> None:
    """A new user wrote the synchronous twin of docs/sessions.md's ``async with
    session.astream(...) as events`` and got 'generator' object does not support the context
    manager protocol."""
    session = metis.Session(MODEL)
    with session.stream("Tell me a long story about the sea.") as events:
        for event in events:
            if isinstance(event, metis.TextDelta):
                break
    assert session.messages[-1].role is Role.ASSISTANT  # the text so far is kept
    assert events is not None  # still held, and the session is free all the same
    assert session.send("And then?").text
    with session.stream_run("Go on.") as run_events:
        kinds = [event.type for event in run_events]
    assert kinds[-1] == "run.complete"


def test_a_one_line_stream_is_a_with_block_too(at_emulator: Emulator) -> None:
    with metis.stream(MODEL, "Hi") as events:
        kinds = [event.type for event in events]
    assert kinds[0] == "message.start" and kinds[-1] == "message.complete"
    events.close()  # closing again does nothing
