"""What a session has cost so far: ``session.cost_usd`` (every call's cost, as each reply's
``cost_usd`` and a run's ``costs`` price it), ``session.costs`` (each call's), and
``session.usage`` (the token totals); None, never 0, once a call's price is unknown; kept by
a session saved and restored."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from metis.core.money import USD
from metis.sessions import Session
from metis.testing.emulator import Emulator

from ..session_helpers import close_all, emulated, get_weather

CLAUDE = "anthropic:claude-sonnet-4-5"
UNPRICED = "ollama:qwen3"  # a server of your own: no table prices it


@pytest.mark.anyio
async def test_the_cost_is_every_replys_and_every_run_steps_summed(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(CLAUDE, adapters=adapters, tools=[get_weather])
    assert session.cost_usd == 0 and session.costs == ()
    first = await session.asend("Hello there")
    second = await session.asend("And again")
    result = await session.arun("What's the weather in Paris?")
    assert first.cost_usd and second.cost_usd and result.cost_usd > 0
    assert session.cost_usd == first.cost_usd + second.cost_usd + result.cost_usd
    assert isinstance(session.cost_usd, USD)
    assert [c.usd for c in session.costs] == [first.cost_usd, second.cost_usd] + [
        c.usd for c in result.costs
    ]
    assert session.usage.input_tokens == (
        first.usage.input_tokens + second.usage.input_tokens + result.usage.input_tokens
    )
    assert session.usage.output_tokens == (
        first.usage.output_tokens + second.usage.output_tokens + result.usage.output_tokens
    )
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_call_whose_price_is_unknown_makes_the_total_unknown(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["anthropic", "ollama"])
    session = Session(CLAUDE, adapters=adapters)
    first_known = (await session.asend("Hello there")).cost_known
    priced = session.cost_usd
    assert priced is not None and priced > 0
    session.model = UNPRICED
    reply = await session.asend("And again")
    assert reply.cost_usd == 0  # one reply's own cost is 0 there, with its Cost saying why
    assert not reply.cost_known and first_known
    assert session.cost_usd is None
    assert [c.priced for c in session.costs] == [True, False]
    assert "no table prices" in (session.costs[1].unpriced or "")
    assert session.usage.output_tokens > 0  # the tokens are still counted
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_runs_total_with_an_unpriced_call_says_it_is_not_the_whole_cost(
    emulator: Emulator,
) -> None:
    """A run's ``cost_usd`` stays a USD (typed code adds and compares it) and counts an
    unpriced call as 0, where the session's total is None; ``cost_known`` tells them apart."""
    adapters = emulated(emulator, stacks=["anthropic", "ollama"])
    session = Session(CLAUDE, adapters=adapters)
    priced = await session.arun("Hello there")
    assert priced.cost_known and priced.cost_usd > 0
    session.model = UNPRICED
    result = await session.arun("And again")
    assert result.cost_usd == 0 and isinstance(result.cost_usd, USD)
    assert not result.cost_known and session.cost_usd is None
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_restored_session_keeps_what_it_cost(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["anthropic", "ollama"])
    session = Session(CLAUDE, adapters=adapters)
    await session.asend("Hello there")
    again = Session.from_json(session.to_json(), adapters=adapters)
    assert again.cost_usd == session.cost_usd and again.costs == session.costs
    assert again.usage == session.usage
    reply = await again.asend("And again")
    assert again.cost_usd == (session.cost_usd or 0) + (reply.cost_usd or 0)
    again.model = UNPRICED
    await again.asend("Once more")
    assert Session.from_json(again.to_json(), adapters=adapters).cost_usd is None
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_session_saved_without_its_costs_has_an_unknown_cost(
    emulator: Emulator,
) -> None:
    """A session saved before costs were: its usage is kept, and what it cost is unknown
    (None), never 0; one that had made no call yet cost nothing."""
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(CLAUDE, adapters=adapters)
    fresh = session.to_dict()
    await session.asend("Hello there")
    old = session.to_dict()
    del old["costs"], fresh["costs"]
    restored = Session.from_json(json.dumps(old), adapters=adapters)
    assert restored.usage == session.usage and restored.cost_usd is None
    assert "saved without its costs" in (restored.costs[0].unpriced or "")
    assert Session.from_json(fresh, adapters=adapters).cost_usd == Decimal(0)
    await close_all(adapters)


def test_the_synchronous_forms_count_the_cost_too(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    session = Session(CLAUDE, tools=[get_weather])
    reply = session.send("Hello")
    result = session.run("What's the weather in Paris?")
    assert reply.cost_usd and result.cost_usd
    assert session.cost_usd == reply.cost_usd + result.cost_usd
    assert len(session.costs) == 1 + result.steps
