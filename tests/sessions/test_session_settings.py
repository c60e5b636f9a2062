"""A session's ``settings`` (the provider's own, of its stack's kind) reach the adapter the
session's turns are sent with, as the one-line calls' do: checked against the stack's
settings when the adapter is built, never left out."""

from __future__ import annotations

import pytest

import metis
from metis.errors import ConfigError
from metis.testing.emulator import Emulator

CLAUDE = "anthropic:claude-sonnet-4-5"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def test_a_sessions_settings_are_the_adapters_as_in_a_one_line_call(at_emulator: Emulator) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'bogus'") as one_line:
        metis.complete(CLAUDE, "Hi", settings={"bogus": 1})
    session = metis.Session(CLAUDE, settings={"bogus": 1})
    with pytest.raises(ConfigError, match="unknown setting 'bogus'") as in_session:
        session.send("Hi")
    assert str(in_session.value) == str(one_line.value)
    assert session.messages == []
    assert at_emulator.stats.requests == 0
