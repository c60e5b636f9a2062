"""The requests of a provider's own tools (``TokenUsage.server_tools``) are priced per
thousand, apart from the tokens: the catalog carries genai-prices' rates
(``web_searches_kcount``, ``storage_searches_kcount``) and ``cost_of`` adds them as
``Cost.server_tools_usd``, included in ``usd``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from metis.catalog.build import build_snapshot
from metis.catalog.catalog import Catalog, default_catalog
from metis.cost import PriceTable, cost_of, priced_cost
from metis.model.response import ModelUsage, ServerToolRequests, TokenUsage
from tests.catalog.genai_prices_standins import Model, Price, Provider

TOKENS = {"input_tokens": 1_000, "output_tokens": 100}


def usage(**requests: int) -> TokenUsage:
    return TokenUsage(**TOKENS, server_tools=ServerToolRequests(**requests))


def table(**rates: Any) -> PriceTable:
    price = {"input": 3, "output": 15, **rates}
    return PriceTable.from_dict({"pricing_version": "t", "models": {"acme:m": price}})


def test_searches_cost_their_rate_per_thousand_on_top_of_the_tokens() -> None:
    priced = table(web_search_per_1k=10, file_search_per_1k="2.5")
    plain = priced.cost("acme:m", TokenUsage(**TOKENS))
    cost = priced.cost("acme:m", usage(web_search=3, file_search=2, web_fetch=4))
    assert cost.server_tools_usd == Decimal("0.035")  # 3 * 10/1000 + 2 * 2.5/1000; fetches free
    assert cost.usd == plain.usd + Decimal("0.035")
    assert cost.breakdown["server_tools"] == cost.server_tools_usd
    assert sum(cost.breakdown.values()) == cost.usd
    assert (cost.input_usd, cost.output_usd) == (plain.input_usd, plain.output_usd)


def test_a_model_with_no_search_rate_prices_its_searches_at_nothing() -> None:
    cost = table().cost("acme:m", usage(web_search=5))
    assert (
        cost.server_tools_usd == 0 and cost.usd == table().cost("acme:m", TokenUsage(**TOKENS)).usd
    )


def test_a_search_rate_stays_in_a_long_prompt_tier_and_outside_the_batch_discount() -> None:
    tiered = table(web_search_per_1k=10, tiers=[{"above_input_tokens": 500, "input": 6}])
    assert tiered.cost("acme:m", usage(web_search=1)).server_tools_usd == Decimal("0.01")
    batch = cost_of("anthropic:claude-sonnet-4-5", usage(web_search=1), batch=True)
    full = cost_of("anthropic:claude-sonnet-4-5", usage(web_search=1))
    assert batch.server_tools_usd == full.server_tools_usd == Decimal("0.01")
    assert batch.input_usd == full.input_usd / 2


def test_the_catalog_prices_each_providers_searches() -> None:
    searched = usage(web_search=2)
    assert cost_of("anthropic:claude-sonnet-4-5", searched).server_tools_usd == Decimal("0.02")
    openai = cost_of("openai:gpt-5", usage(web_search=1, file_search=4))
    assert openai.server_tools_usd == Decimal("0.02")  # $10 and $2.50 per thousand
    gemini = priced_cost("gemini:gemini-2.5-pro", searched)
    assert gemini is not None and gemini.server_tools_usd == Decimal("0.07")  # $35 a thousand
    whole = PriceTable.from_catalog(default_catalog())
    assert whole.cost("anthropic:claude-sonnet-4-5", searched).server_tools_usd == Decimal("0.02")


def test_an_other_models_searches_are_priced_at_its_own_rate() -> None:
    rates = {"input": 1, "output": 1}
    data = {
        "pricing_version": "t",
        "models": {"acme:m": {**rates, "web_search_per_1k": 10}, "acme:n": {**rates}},
    }
    other = ModelUsage(model="n", usage=TokenUsage(server_tools=ServerToolRequests(web_search=1)))
    cost = PriceTable.from_dict(data).cost(
        "acme:m", usage(web_search=1).model_copy(update={"other_models": (other,)})
    )
    assert cost.server_tools_usd == Decimal("0.01")  # n's search has no rate: free


def test_the_snapshot_takes_genai_prices_rates_per_thousand_requests() -> None:
    searching = Price(Decimal(1), Decimal(2), Decimal(10), storage_searches_kcount=Decimal("2.5"))
    models = [Model("a-1", searching), Model("a-2", Price(Decimal(1), Decimal(2)))]
    models_dev = {"acme": {"name": "Acme", "models": {"a-1": {}, "a-2": {}}}}
    snapshot = build_snapshot(models_dev, [Provider("acme", models)], version="v")
    prices = {m["id"]: m["prices"] for m in snapshot["models"]}
    assert prices["a-1"]["web_search_per_1k"] == "10"
    assert prices["a-1"]["file_search_per_1k"] == "2.5"
    assert "web_search_per_1k" not in prices["a-2"]
    one = Catalog(snapshot).get("acme", "a-1")
    assert one is not None and one.prices is not None
    assert one.prices.web_search_per_1k == Decimal(10)
