"""A reply is priced at the rates of the service tier that served it (``usage.service_tier``)
where the catalog has them (genai-prices' price variants, kept as ``prices.service_tiers``),
and at the standard rates with ``Cost.tier_unpriced`` and one WARN where it has not; a batch
at the batch rates where the catalog has them, else at the discount (docs/catalog.md)."""

from __future__ import annotations

import datetime
import logging
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from metis import cost
from metis.catalog.build import _genai_service_tiers
from metis.cost import PriceTable, cost_of, priced_cost
from metis.errors import ConfigError
from metis.model.response import TokenUsage
from metis.model.tier import ServiceTier, TierKind, service_tier

MILLION = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
GPT5 = "openai:gpt-5"  # the catalog's: $1.25 in, $10 out; flex half, priority double


def served(word: str | None, usage: TokenUsage = MILLION) -> TokenUsage:
    return usage.model_copy(update={"service_tier": service_tier(word)})


def test_the_usage_dumps_its_tier_only_when_it_has_one() -> None:
    assert "service_tier" not in MILLION.model_dump()
    flex = served("ON_DEMAND_FLEX")
    assert flex.model_dump()["service_tier"] == {"kind": "flex", "raw": "ON_DEMAND_FLEX"}
    assert TokenUsage.model_validate_json(flex.model_dump_json()) == flex


def test_a_sum_keeps_the_tier_only_where_both_were_served_at_it() -> None:
    flex = served("flex")
    assert flex.plus(flex).service_tier == ServiceTier(kind=TierKind.FLEX, raw="flex")
    assert flex.plus(flex).input_tokens == 2_000_000
    assert flex.plus(served("priority")).service_tier is None
    assert flex.plus(MILLION).service_tier is None
    assert TokenUsage().plus(flex) == flex == flex.plus(TokenUsage())  # a total's start


@pytest.mark.parametrize(
    ("word", "usd", "tier"),
    [
        (None, "11.25", None),
        ("default", "11.25", None),
        ("flex", "5.625", TierKind.FLEX),
        ("priority", "22.5", TierKind.PRIORITY),
        ("fast", "22.5", TierKind.PRIORITY),
    ],
)
def test_a_reply_is_priced_at_its_tiers_rates(word: str, usd: str, tier: TierKind) -> None:
    priced = cost_of(GPT5, served(word))
    assert priced.usd == Decimal(usd)
    assert priced.service_tier == tier and priced.tier_unpriced is None


def test_a_tier_the_catalog_has_no_rates_for_is_priced_standard_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = "deepseek:deepseek-chat"
    usage = TokenUsage(input_tokens=1_000, output_tokens=100)
    reason = f"no priority rates for {model}"
    cost._warned_unpriced = {w for w in cost._warned_unpriced if reason not in w}
    with caplog.at_level(logging.WARNING, logger="metis"):
        first = cost_of(model, served("priority", usage))
        second = cost_of(model, served("priority", usage))
    assert first.usd == second.usd == cost_of(model, usage).usd
    assert first.service_tier is None and first.priced
    assert first.tier_unpriced is not None and reason in first.tier_unpriced
    warns = [r for r in caplog.records if getattr(r, "event", "") == "metis.unpriced_service_tier"]
    assert len(warns) == 1 and reason in warns[0].getMessage()


def test_reserved_capacity_is_priced_standard_with_the_marker() -> None:
    priced = cost_of(GPT5, served("scale"))
    assert priced.usd == cost_of(GPT5, MILLION).usd
    assert priced.tier_unpriced is not None and "reserved" in priced.tier_unpriced


def test_a_batch_is_priced_at_the_catalogs_batch_rates_where_it_has_them() -> None:
    cached = TokenUsage(input_tokens=1_000_000, cached_input_tokens=1_000_000)
    # gpt-4.1's batch rates halve input and output but not the cache reads ($0.50 stays)
    batch = cost_of("openai:gpt-4.1", cached, batch=True)
    assert batch.input_usd == Decimal(1) and batch.cached_input_usd == Decimal("0.5")
    assert batch.service_tier is TierKind.BATCH and batch.pricing_version.endswith("+batch")
    assert cost_of("openai:gpt-4.1", served("batch", cached)) == batch
    assert priced_cost("openai:gpt-4.1", served("batch", cached)) == batch


def test_a_batch_of_long_prompts_is_the_long_prompt_price_at_the_batch_ratio() -> None:
    model = "anthropic:claude-sonnet-4-5"  # over 200k input: $6 and $22.50, a batch half
    assert cost_of(model, MILLION).usd == Decimal("28.5")
    assert cost_of(model, MILLION, batch=True).usd == Decimal("14.25")


def test_the_gateways_price_is_the_tiers() -> None:
    assert priced_cost(GPT5, served("flex")) == cost_of(GPT5, served("flex"))


TABLE: dict[str, Any] = {
    "pricing_version": "t1",
    "models": {
        "x:m": {
            "input": 2,
            "output": 8,
            "tiers": [{"above_input_tokens": 100, "input": 4, "output": 16}],
            "service_tiers": {"flex": {"input": 1, "output": 4}, "priority": {"output": 12}},
        }
    },
}


def test_a_price_table_gives_tier_rates_and_keeps_the_rest() -> None:
    table = PriceTable.from_dict(TABLE)
    small = TokenUsage(input_tokens=100, output_tokens=100)
    assert table.cost("x:m", small).usd == Decimal("0.001")
    assert table.cost("x:m", served("flex", small)).usd == Decimal("0.0005")
    assert table.cost("x:m", served("priority", small)).usd == Decimal("0.0014")  # input kept
    big = TokenUsage(input_tokens=1_000, output_tokens=0)  # the long-prompt tier, halved
    assert table.cost("x:m", served("flex", big)).usd == Decimal("0.002")
    unpriced = table.cost("x:m", served("batch", small))
    assert unpriced.usd == Decimal("0.001") and unpriced.tier_unpriced is not None


def test_a_price_table_refuses_a_tier_it_does_not_know() -> None:
    bad = {**TABLE, "models": {"x:m": {"input": 1, "output": 1, "service_tiers": {"turbo": {}}}}}
    with pytest.raises(ConfigError, match="turbo"):
        PriceTable.from_dict(bad)


def variant(when: dict[str, str], start: datetime.date | None = None, **rates: str) -> Any:
    prices = SimpleNamespace(
        input_mtok=rates.get("input"),
        output_mtok=rates.get("output"),
        cache_read_mtok=rates.get("cache_read"),
        cache_write_mtok=None,
    )
    constraint = None if start is None else SimpleNamespace(start_date=start)
    return SimpleNamespace(when=when, prices=prices, constraint=constraint)


def test_the_catalog_keeps_the_variants_in_force_of_the_tiers_it_prices() -> None:
    today = datetime.date(2026, 11, 1)
    model = SimpleNamespace(
        price_variants=[
            variant({"service_tier": "default"}),  # no rates of its own: nothing kept
            variant({"service_tier": "flex"}, datetime.date(2026, 12, 1), input="9"),  # later
            variant({"service_tier": "flex"}, datetime.date(2026, 10, 1), input="0.5"),
            variant({"service_tier": "priority"}, output="20"),
            variant({"service_tier": "fast"}, input="3"),  # priority's other name: not mixed in
            variant({"processing": "batch"}, input="0.5", output="4"),
            variant({"speed": "fast"}, input="7"),  # not a service tier
            variant({"service_tier": "flex", "region": "eu"}, input="8"),
        ]
    )
    assert _genai_service_tiers(model, today) == [
        {"tier": "flex", "input": "0.5"},
        {"tier": "priority", "output": "20"},
        {"tier": "batch", "input": "0.5", "output": "4"},
    ]
    only_fast = SimpleNamespace(price_variants=[variant({"service_tier": "fast"}, input="3")])
    assert _genai_service_tiers(only_fast, today) == [{"tier": "priority", "input": "3"}]
    assert _genai_service_tiers(SimpleNamespace(), today) == []


@pytest.mark.parametrize("usage", [MILLION, TokenUsage(input_tokens=300_000, output_tokens=10)])
def test_anthropics_priority_tier_is_priced_at_its_standard_rates_and_named(
    usage: TokenUsage, caplog: pytest.LogCaptureFixture
) -> None:
    """Anthropic publishes no Priority Tier rates: it draws a commitment down by the standard
    rates' ratios (a long prompt's too). A priority reply is priced at them, named as
    priority, with no unpriced marker nor WARN (it had both)."""
    model = "anthropic:claude-sonnet-4-5"
    with caplog.at_level(logging.WARNING, logger="metis"):
        priced = cost_of(model, served("priority", usage))
    assert priced.usd == cost_of(model, usage).usd
    assert priced.service_tier is TierKind.PRIORITY and priced.tier_unpriced is None
    assert not [r for r in caplog.records if "service_tier" in str(getattr(r, "event", ""))]
    batch = cost_of(model, served("batch", usage))  # genai-prices' own rates still win
    assert batch.service_tier is TierKind.BATCH and batch.usd < priced.usd
