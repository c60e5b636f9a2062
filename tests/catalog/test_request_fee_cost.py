"""A fee a model bills per call apart from its tokens: Perplexity's Sonar request fee
(genai-prices' ``requests_kcount``, the catalog's ``requests_per_1k``) is counted by
``cost_of`` in ``Cost.server_tools_usd`` (it pays for the search every call makes); a search
model whose per-call fee the catalog has no rate for (OpenAI's gpt-4o-search-preview), or
whose reply does not count its searches, is priced at its tokens, and ``Cost.fee_unpriced``
says so (docs/catalog.md)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from metis.catalog.build import build_snapshot
from metis.catalog.catalog import Catalog
from metis.cost import PriceTable, cost_of
from metis.model.response import ServerToolRequests, TokenUsage
from tests.catalog.genai_prices_standins import Model, Price, Provider

TOKENS = TokenUsage(input_tokens=1_000, output_tokens=100)


def test_a_sonar_call_costs_its_request_fee_on_top_of_its_tokens() -> None:
    cost = cost_of("perplexity:sonar", TOKENS)  # $1 and $1 per million, $12 per thousand calls
    assert cost.server_tools_usd == Decimal("0.012")
    assert cost.usd == Decimal("0.0011") + Decimal("0.012") == sum(cost.breakdown.values())
    assert cost.fee_unpriced is None
    assert cost_of("perplexity:sonar-pro", TOKENS).server_tools_usd == Decimal("0.014")


@pytest.mark.parametrize("model", ["openai:gpt-4o-search-preview", "openai:gpt-5-search-api"])
def test_a_search_model_without_a_fee_rate_says_its_fee_is_not_counted(model: str) -> None:
    cost = cost_of(model, TOKENS)
    assert cost.server_tools_usd == 0 and cost.usd == cost.input_usd + cost.output_usd
    assert cost.fee_unpriced is not None and "not counted" in cost.fee_unpriced
    assert model.split(":")[1] in cost.fee_unpriced


def test_searches_a_reply_counts_are_priced_and_uncounted_ones_said() -> None:
    counted = TOKENS.model_copy(update={"server_tools": ServerToolRequests(web_search=2)})
    priced = cost_of("perplexity:perplexity/sonar", counted)  # $2.50 per thousand searches
    assert priced.server_tools_usd == Decimal("0.005") and priced.fee_unpriced is None
    uncounted = cost_of("perplexity:perplexity/sonar", TOKENS)
    assert uncounted.fee_unpriced is not None and "gave no count" in uncounted.fee_unpriced


def test_a_model_that_bills_no_fee_says_nothing() -> None:
    for model in ("openai:gpt-4o", "perplexity:r1-1776", "anthropic:claude-sonnet-4-5"):
        assert cost_of(model, TOKENS).fee_unpriced is None
    table = PriceTable.from_dict(
        {"pricing_version": "t", "models": {"a:m": {"input": 1, "output": 1, "requests_per_1k": 5}}}
    )
    assert table.cost("a:m", TOKENS).server_tools_usd == Decimal("0.005")


def test_the_snapshot_takes_genai_prices_fee_per_thousand_requests() -> None:
    models = [Model("s-1", Price(Decimal(1), Decimal(1), requests_kcount=Decimal(12)))]
    models_dev = {"acme": {"name": "Acme", "models": {"s-1": {}}}}
    snapshot = build_snapshot(models_dev, [Provider("acme", models)], version="v")
    assert snapshot["models"][0]["prices"]["requests_per_1k"] == "12"
    info = Catalog(snapshot).get("acme", "s-1")
    assert info is not None and info.prices is not None
    assert info.prices.requests_per_1k == Decimal(12)
