"""The cost of one reply: ``reply.cost_usd`` on what ``metis.complete`` and ``Session.send``
return, priced as a run's calls are (``cost_of(reply.model, reply.usage)``); None on a reply
metis did not price (an adapter's own)."""

from __future__ import annotations

import pytest

import metis
from metis.core.money import USD
from metis.cost import cost_of
from metis.model import CanonicalResponse, Message
from metis.model.request import CanonicalRequest
from metis.sessions import Session
from metis.testing.emulator import Emulator

from ..session_helpers import emulated

CLAUDE = "anthropic:claude-sonnet-4-5"


@pytest.mark.anyio
async def test_a_session_reply_has_its_cost_and_a_run_sums_the_same_costs(
    emulator: Emulator,
) -> None:
    session = Session(CLAUDE, adapters=emulated(emulator, stacks=["anthropic"]))
    reply = await session.asend("Hi")
    assert reply.cost_usd is not None and reply.cost_usd > 0
    assert reply.cost_usd == cost_of(reply.model, reply.usage).usd
    assert isinstance(reply.cost_usd, USD) and reply.cost_known
    result = await session.arun("Hi again")
    assert result.response.cost_usd == result.costs[-1].usd == result.cost_usd


@pytest.mark.anyio
async def test_a_reply_of_complete_has_its_cost(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    reply = await metis.acomplete(CLAUDE, "Hi")
    assert reply.cost_usd is not None and reply.cost_usd > 0
    assert reply.cost_usd == cost_of(reply.model, reply.usage).usd
    assert reply.cost_known


@pytest.mark.anyio
async def test_a_reply_of_complete_whose_model_has_no_price_says_its_cost_is_unknown(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0 stays a USD typed code can add, as a run's ``cost_usd`` does; ``cost_known`` is False,
    as the run's is, so the 0 is not read as free."""
    monkeypatch.setenv("OLLAMA_HOST", emulator.base_url("ollama"))
    reply = await metis.acomplete("ollama:qwen3", "Hi")
    assert reply.cost_usd == 0 and isinstance(reply.cost_usd, USD)
    assert not reply.cost_known


@pytest.mark.anyio
async def test_an_adapters_own_reply_is_not_priced(emulator: Emulator) -> None:
    adapter = emulated(emulator, stacks=["anthropic"])["anthropic"]
    request = CanonicalRequest(model=CLAUDE, messages=[Message.user("Hi")], max_output_tokens=64)
    reply = await adapter.complete(request)
    assert reply.cost_usd is None and not reply.cost_known
    again = CanonicalResponse.model_validate_json(reply.model_dump_json())
    assert again == reply
    await adapter.aclose()


def test_a_reply_cost_round_trips_as_a_plain_decimal() -> None:
    reply = CanonicalResponse.model_validate(
        {
            "request_id": "r",
            "model": CLAUDE,
            "provider": "anthropic",
            "content": [],
            "stop_reason": {"kind": "end_turn"},
            "usage": {"input_tokens": 1, "output_tokens": 0},
            "latency_ms": 1,
            "cost_usd": "3.6E-7",
        }
    )
    assert str(reply.cost_usd) == "0.00000036"
    assert '"cost_usd":"0.00000036"' in reply.model_dump_json()
