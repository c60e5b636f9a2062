"""A process's default telemetry sink: the one-line calls and sessions, which make their own
adapters, report to it (docs/calls.md, "Telemetry")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import metis
from metis.errors import ConfigError
from metis.telemetry import ListSink
from metis.telemetry.sink import NULL_SINK, default_sink, set_default_sink
from metis.testing.emulator import Emulator


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


@pytest.fixture
def sink() -> Iterator[ListSink]:
    kept = ListSink()
    set_default_sink(kept)
    try:
        yield kept
    finally:
        set_default_sink(None)


MODEL = "anthropic:claude-sonnet-4-5"


@pytest.mark.anyio
async def test_one_line_calls_and_sessions_report_to_the_default_sink(
    at_emulator: Emulator, sink: ListSink
) -> None:
    """A new user of metis.complete and Session had no way to see a call's attempts, retries
    or spans: telemetry= is build_adapter's, and neither takes an adapter of a model string."""
    await metis.acomplete(MODEL, "Hi")
    assert sink.names() == ["llm.call_started", "llm.call_completed"]
    sink.clear()
    session = metis.Session(MODEL)
    await session.asend("Hi")
    assert sink.names() == ["llm.call_started", "llm.call_completed"]


@pytest.mark.anyio
async def test_an_adapter_made_before_the_default_changed_is_not_reused_by_the_calls(
    at_emulator: Emulator,
) -> None:
    await metis.acomplete(MODEL, "Hi")  # an adapter kept for the loop, with no sink
    kept = ListSink()
    set_default_sink(kept)
    try:
        await metis.acomplete(MODEL, "Hi")
        assert kept.names() == ["llm.call_started", "llm.call_completed"]
        adapter = metis.build_adapter("anthropic")
        assert adapter.telemetry is kept
        own = ListSink()
        assert metis.build_adapter("anthropic", telemetry=own).telemetry is own
    finally:
        set_default_sink(None)
    assert default_sink() is NULL_SINK
    kept.clear()
    await metis.acomplete(MODEL, "Hi")
    assert kept.names() == []


def test_a_default_sink_that_is_no_sink_is_refused() -> None:
    with pytest.raises(ConfigError, match="emit"):
        set_default_sink("logs")  # type: ignore[arg-type]
