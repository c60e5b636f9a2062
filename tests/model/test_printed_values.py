"""The small value types a user prints (StopReason, TokenUsage, ServiceTier, Cost) print the
fields that say something, an enum as its word; equality and dumps are as they were."""

from __future__ import annotations

import metis
from metis.catalog.usage_cost import Cost
from metis.core.money import USD
from metis.model.response import ServerToolRequests, StopKind, StopReason, TokenUsage
from metis.model.tier import ServiceTier, TierKind, service_tier

NAMES = {"StopReason": StopReason, "TokenUsage": TokenUsage, "ServiceTier": ServiceTier}


def test_a_stop_reason_prints_its_kind_and_the_providers_word() -> None:
    """Before: ``kind=<StopKind.MAX_TOKENS: 'max_tokens'> raw='length' sequence=None
    category=None explanation=None``."""
    cut = StopReason(kind=StopKind.MAX_TOKENS, raw="length")
    assert str(cut) == "max_tokens (length)"
    assert str(StopReason(kind=StopKind.END_TURN, raw="end_turn")) == "end_turn"
    assert str(StopReason(kind=StopKind.CANCELLED)) == "cancelled"
    assert repr(cut) == "StopReason(kind='max_tokens', raw='length')"
    refused = StopReason(kind=StopKind.REFUSAL, raw="refusal", category="cyber")
    assert repr(refused) == "StopReason(kind='refusal', raw='refusal', category='cyber')"
    for reason in (cut, refused):
        assert eval(repr(reason), NAMES) == reason
    assert cut.model_dump() == {"kind": "max_tokens", "raw": "length", "sequence": None}


def test_a_usage_prints_the_counts_that_are_not_zero() -> None:
    usage = TokenUsage(
        input_tokens=12,
        output_tokens=5,
        server_tools=ServerToolRequests(web_search=1),
        service_tier=service_tier("default"),
    )
    assert repr(TokenUsage()) == "TokenUsage()"
    assert repr(usage) == (
        "TokenUsage(input_tokens=12, output_tokens=5, server_tools=ServerToolRequests"
        "(web_search=1, web_fetch=0, file_search=0), service_tier=ServiceTier(kind='standard', "
        "raw='default'))"
    )
    assert str(TokenUsage(input_tokens=12, output_tokens=5)) == "input_tokens=12 output_tokens=5"
    names = NAMES | {"ServerToolRequests": ServerToolRequests}
    assert eval(repr(usage), names) == usage
    assert TokenUsage(input_tokens=12).model_dump()["cached_input_tokens"] == 0


def test_a_service_tier_prints_its_kind_and_the_providers_word() -> None:
    flex = service_tier("ON_DEMAND_FLEX")
    assert flex is not None
    assert str(flex) == "flex (ON_DEMAND_FLEX)"
    assert str(ServiceTier(kind=TierKind.FLEX, raw="flex")) == "flex"
    assert repr(flex) == "ServiceTier(kind='flex', raw='ON_DEMAND_FLEX')"
    assert eval(repr(flex), NAMES) == flex
    assert flex.model_dump() == {"kind": "flex", "raw": "ON_DEMAND_FLEX"}


def test_a_cost_prints_its_amounts_and_what_is_set() -> None:
    cost = metis.cost_of("openai:gpt-4o", TokenUsage(input_tokens=1000))
    shown = repr(cost)
    assert shown.startswith("Cost(model='openai:gpt-4o', usd=USD('")
    assert "unpriced" not in shown and "None" not in shown and "other_models" not in shown
    assert eval(shown, {"Cost": Cost, "USD": USD}) == cost
    assert str(cost).startswith("model='openai:gpt-4o' usd=USD('")
