"""metis.cost: USD from token counts and a versioned price table (docs/contract.md §5)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from metis.catalog import default_catalog
from metis.cost import PriceTable, cost_of, default_price_table
from metis.errors import ConfigError
from metis.model.response import TokenUsage

TABLE = {
    "pricing_version": "2026-01-01",
    "currency": "USD",
    "models": {
        "anthropic:claude-sonnet-4-5": {
            "input": 3.00,
            "output": 15.00,
            "cached_input": 0.30,
            "cache_creation": 3.75,
            "aliases": ["claude-sonnet-4-5-20250929"],
        },
        "openai:gpt-4o-mini": {"input": 0.15, "output": 0.60, "cached_input": 0.075},
        "ollama:llama3": {"input": 0, "output": 0},
    },
}


def table(**changes: Any) -> PriceTable:
    return PriceTable.from_dict({**TABLE, **changes}, "prices.yaml")


def test_cost_is_the_four_field_formula_in_exact_decimals() -> None:
    usage = TokenUsage(
        input_tokens=1_234,
        output_tokens=567,
        cached_input_tokens=10_000,
        cache_creation_input_tokens=2_000,
    )
    cost = table().cost("anthropic:claude-sonnet-4-5", usage)
    # 1234*3 + 567*15 + 10000*0.30 + 2000*3.75 = 3702 + 8505 + 3000 + 7500 = 22707 per million
    assert cost.input_usd == Decimal("0.003702")
    assert cost.output_usd == Decimal("0.008505")
    assert cost.cached_input_usd == Decimal("0.003")
    assert cost.cache_creation_usd == Decimal("0.0075")
    assert cost.usd == Decimal("0.022707")
    assert cost.usd.as_tuple().exponent == -8  # quantized to 1e-8
    assert cost.pricing_version == "2026-01-01"
    assert cost.model == "anthropic:claude-sonnet-4-5"
    assert sum(cost.breakdown.values()) == cost.usd
    assert set(cost.breakdown) == {
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "cache_creation_input_tokens",
        "server_tools",
    }
    assert cost.server_tools_usd == 0


def test_rates_are_read_as_decimal_text_not_binary_floats() -> None:
    # 0.075 is not exact in binary; as a Decimal 1 token costs exactly 7.5e-8 -> 8e-8 (half up)
    cost = table().cost("openai:gpt-4o-mini", TokenUsage(cached_input_tokens=1))
    assert cost.cached_input_usd == Decimal("0.00000008")
    three = table().cost("openai:gpt-4o-mini", TokenUsage(cached_input_tokens=3_000_000))
    assert three.usd == Decimal("0.225")


def test_cached_input_is_cheaper_than_uncached_input() -> None:
    prices = table()
    uncached = prices.cost("anthropic:claude-sonnet-4-5", TokenUsage(input_tokens=100_000))
    cached = prices.cost("anthropic:claude-sonnet-4-5", TokenUsage(cached_input_tokens=100_000))
    assert cached.usd < uncached.usd
    assert cached.usd * 10 == uncached.usd


def test_missing_cache_rates_default_to_the_input_rate() -> None:
    price = table().price("openai:gpt-4o-mini")
    assert price.cache_creation is None
    assert price.cache_creation_rate == price.input == Decimal("0.15")
    assert price.cached_input_rate == Decimal("0.075")
    only_io = table(models={"x:y": {"input": 2, "output": 4}}).price("x:y")
    assert only_io.cached_input_rate == only_io.cache_creation_rate == Decimal(2)


def test_estimated_usage_gives_an_estimated_cost() -> None:
    usage = TokenUsage(input_tokens=10, output_tokens=10, estimated=True)
    assert table().cost("openai:gpt-4o-mini", usage).estimated
    assert not table().cost("openai:gpt-4o-mini", TokenUsage(input_tokens=10)).estimated


def test_local_models_may_cost_nothing() -> None:
    cost = table().cost("ollama:llama3", TokenUsage(input_tokens=10**6, output_tokens=10**6))
    assert cost.usd == 0


def test_stored_usage_can_be_repriced_under_a_new_table() -> None:
    stored = [
        ("anthropic:claude-sonnet-4-5", TokenUsage(input_tokens=1_000_000, output_tokens=100_000)),
        ("openai:gpt-4o-mini", TokenUsage(input_tokens=2_000_000, cached_input_tokens=1_000_000)),
    ]
    old = table().reprice(stored)
    cheaper = {
        **TABLE["models"],
        "anthropic:claude-sonnet-4-5": {"input": 2, "output": 10, "cached_input": 0.2},
    }
    new = table(pricing_version="2027-01-01", models=cheaper).reprice(stored)
    assert [c.pricing_version for c in old] == ["2026-01-01"] * 2
    assert [c.pricing_version for c in new] == ["2027-01-01"] * 2
    assert old[0].usd == Decimal("4.5")  # 3 + 1.5
    assert new[0].usd == Decimal("3")  # 2 + 1
    assert old[1].usd == new[1].usd == Decimal("0.375")  # 0.30 + 0.075, unchanged rates


def test_models_are_found_by_id_alias_and_wire_name() -> None:
    prices = table()
    by_id = prices.price("anthropic:claude-sonnet-4-5")
    assert prices.price("claude-sonnet-4-5-20250929") is by_id  # alias
    assert prices.price("anthropic:claude-sonnet-4-5-20250929") is by_id  # provider:alias
    assert prices.price("claude-sonnet-4-5") is by_id  # bare wire name
    assert by_id.model == "anthropic:claude-sonnet-4-5"
    usage = TokenUsage(input_tokens=1000)
    assert prices.cost("claude-sonnet-4-5-20250929", usage).model == "anthropic:claude-sonnet-4-5"


def test_a_wire_name_under_another_provider_is_not_priced_at_this_ones_rates() -> None:
    with pytest.raises(ConfigError, match="openrouter:claude-sonnet-4-5"):
        table().price("openrouter:claude-sonnet-4-5")


def test_an_unknown_model_names_the_model_and_the_table_file() -> None:
    with pytest.raises(ConfigError) as caught:
        table().cost("anthropic:claude-nonexistent", TokenUsage(input_tokens=1))
    assert "anthropic:claude-nonexistent" in str(caught.value)
    assert "prices.yaml" in str(caught.value)


def test_the_default_table_is_the_catalogs_prices_and_every_entry_has_every_rate() -> None:
    prices = PriceTable.load()
    catalog = default_catalog()
    assert prices.pricing_version == catalog.version
    assert prices.currency == "USD"
    assert prices.source == catalog.source
    assert len(prices.models) > 1000
    for model_id, price in prices.models.items():
        assert ":" in model_id
        for rate in (price.input, price.output, price.cached_input_rate, price.cache_creation_rate):
            assert isinstance(rate, Decimal) and rate >= 0, model_id
    sonnet = prices.price("anthropic:claude-sonnet-4-5")
    assert (sonnet.input, sonnet.output) == (Decimal(3), Decimal(15))
    assert (sonnet.cached_input_rate, sonnet.cache_creation_rate) == (
        Decimal("0.30"),
        Decimal("3.75"),
    )
    assert prices.price("openai:gpt-4o").cached_input_rate == Decimal("1.25")
    assert prices.price("openai_responses:gpt-4o") == prices.price("openai:gpt-4o")


def test_cost_of_uses_the_catalog_unless_given_a_table() -> None:
    usage = TokenUsage(input_tokens=100_000, output_tokens=1_000_000)
    assert default_price_table() is default_price_table()
    haiku = cost_of("anthropic:claude-haiku-4-5", usage)
    assert haiku.usd == Decimal("5.1")  # 0.1 M in at $1, 1 M out at $5
    assert haiku.pricing_version == default_catalog().version
    assert cost_of("anthropic:claude-haiku-4-5-20251001", usage) == haiku
    assert cost_of("anthropic:claude-sonnet-4-5", usage, table()).usd == Decimal("15.3")


def test_cost_of_an_unpriced_model_is_an_unpriced_cost_a_sum_can_go_past(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from metis import cost

    cost._warned_unpriced.discard("ollama:my-own-finetune")
    usage = TokenUsage(input_tokens=1000, output_tokens=1000)
    calls = ["anthropic:claude-haiku-4-5", "ollama:my-own-finetune", "ollama:my-own-finetune"]
    with caplog.at_level(logging.WARNING, logger="metis"):
        costs = [cost_of(model, usage) for model in calls]
        total = sum(c.usd for c in costs)
    assert total == costs[0].usd and costs[0].priced and costs[0].unpriced is None
    unpriced = costs[1]
    assert not unpriced.priced and unpriced.usd == 0 and unpriced.model == "ollama:my-own-finetune"
    assert unpriced.unpriced is not None and "no price for model" in unpriced.unpriced
    warns = [r for r in caplog.records if getattr(r, "event", "") == "metis.unpriced_model"]
    assert len(warns) == 1  # once per model per process
    assert not cost_of("openai:gpt-4o", usage, table()).priced  # a table without it
    with pytest.raises(ConfigError, match="no price for model"):
        table().cost("openai:gpt-4o", usage)  # the table's own lookup still says so


def test_a_replys_cost_on_a_server_of_your_own_is_0_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every first call to an Ollama model warned 'no price for model ollama:qwen3 ...; add it
    under models:', for a model nothing bills; a paid service the catalog lacks still warns."""
    import logging

    from metis import cost
    from metis.calls.priced import priced_usage

    usage = TokenUsage(input_tokens=1000, output_tokens=1000)
    for model in ("ollama:qwen3", "vllm:my-model", "sambanova:some-new-model"):
        cost._warned_unpriced.discard(model)
    with caplog.at_level(logging.WARNING, logger="metis"):
        local = [priced_usage(m, usage) for m in ("ollama:qwen3", "vllm:my-model")]
        paid = priced_usage("sambanova:some-new-model", usage)
    assert all(c.usd == 0 and not c.priced for c in [*local, paid])
    assert local[0].unpriced is not None and "a server of your own" in local[0].unpriced
    warned = [r.model for r in caplog.records if getattr(r, "event", "") == "metis.unpriced_model"]
    assert warned == ["sambanova:some-new-model"]


def test_an_unpriced_model_with_a_misspelt_stack_says_the_stack_meant() -> None:
    """'opnai:gpt-4o' was 'no price for model', as if OpenAI had not priced gpt-4o."""
    usage = TokenUsage(input_tokens=1000)
    said = cost_of("opnai:gpt-4o", usage).unpriced
    assert said is not None and said.endswith("no stack is named 'opnai'; did you mean 'openai'?")
    for model in ("ollama:my-own-finetune", "openai:gpt-9", "google:gemini-9", "my/s.yaml:m"):
        said = cost_of(model, usage).unpriced
        assert said is not None and "no stack is named" not in said, model


def test_a_tier_prices_every_token_of_a_call_past_its_threshold() -> None:
    tiered = table(
        models={
            "google:gemini-pro": {
                "input": 1,
                "output": 10,
                "tiers": [{"above_input_tokens": 200_000, "input": 2, "output": 15}],
            }
        }
    )
    at = tiered.cost("google:gemini-pro", TokenUsage(input_tokens=200_000, output_tokens=1000))
    past = tiered.cost("google:gemini-pro", TokenUsage(input_tokens=200_001, output_tokens=1000))
    assert at.input_usd == Decimal("0.2") and at.output_usd == Decimal("0.01")
    assert past.input_usd == Decimal("0.400002") and past.output_usd == Decimal("0.015")
    # cached input counts toward the threshold: the prompt is what the provider measures
    cached = TokenUsage(input_tokens=1000, cached_input_tokens=199_500, output_tokens=0)
    assert tiered.cost("google:gemini-pro", cached).input_usd == Decimal("0.002")


def test_cost_of_prices_a_models_long_prompt_tier_from_the_catalog() -> None:
    info = default_catalog().get("google", "gemini-2.5-pro")
    assert info is not None and info.prices is not None and info.prices.tiers
    tier = info.prices.tiers[0]
    short = cost_of("gemini:gemini-2.5-pro", TokenUsage(input_tokens=tier.above_input_tokens))
    long = cost_of("gemini:gemini-2.5-pro", TokenUsage(input_tokens=tier.above_input_tokens + 1))
    assert short.input_usd == info.prices.input * tier.above_input_tokens / 1_000_000
    assert tier.input is not None
    assert long.input_usd == tier.input * (tier.above_input_tokens + 1) / 1_000_000


def test_a_table_loads_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(
        'pricing_version: "v2"\nmodels:\n  a:b: {input: 0.10, output: "0.40"}\n', encoding="utf-8"
    )
    prices = PriceTable.load(path)
    assert prices.source == str(path)
    assert prices.price("a:b").output == Decimal("0.40")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"pricing_version": "v", "models": {"a:b": {"input": -1, "output": 1}}},
            "models.a:b.input: expected a number >= 0 (USD per million tokens), got -1",
        ),
        (
            {"pricing_version": "v", "models": {"a:b": {"input": "cheap", "output": 1}}},
            "models.a:b.input: expected a number (USD per million tokens), got 'cheap'",
        ),
        (
            {"pricing_version": "v", "models": {"a:b": {"input": 1, "output": True}}},
            "models.a:b.output: expected a number (USD per million tokens), got True",
        ),
        ({"models": {}}, "pricing_version: required key is missing"),
        (
            {"pricing_version": "v", "models": {"a:b": {"input": 1}}},
            "models.a:b.output: required key is missing",
        ),
        (
            {"pricing_version": "v", "models": {"a:b": {"input": 1, "output": 1, "inptu": 2}}},
            "models.a:b.inptu: unknown key; expected one of: input, output, cached_input",
        ),
        ({"pricing_version": "v", "models": {}, "rates": {}}, "rates: unknown key"),
        ({"pricing_version": "v", "currency": "EUR", "models": {}}, "currency: expected 'USD'"),
        ({"pricing_version": "v", "models": {"a:b": None}}, "models.a:b: expected a mapping"),
        ({"pricing_version": "v", "models": []}, "models: expected a mapping, got []"),
        (
            {
                "pricing_version": "v",
                "models": {
                    "a:b": {"input": 1, "output": 1, "aliases": ["x"]},
                    "a:c": {"input": 1, "output": 1, "aliases": ["x"]},
                },
            },
            "models.a:c.aliases: 'x' already names a:b",
        ),
        (["not", "a", "mapping"], "expected a mapping with pricing_version"),
    ],
)
def test_a_bad_table_is_a_config_error_naming_the_file_and_key(data: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PriceTable.from_dict(data, "prices.yaml")
    message = str(caught.value)
    assert message.startswith("prices.yaml: ")
    assert expected in message


def test_bad_yaml_and_missing_files_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        PriceTable.load(bad)
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        PriceTable.load(tmp_path / "missing.yaml")


def test_a_catalog_model_s_price_is_built_once_and_prices_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway prices every reply: the catalog entry's rates are read into a price once."""
    import metis.catalog.catalog_prices as prices

    built: list[str] = []
    build = prices.catalog_price

    def counted(info: Any) -> Any:
        built.append(info.key)
        return build(info)

    monkeypatch.setattr(prices, "catalog_price", counted)
    monkeypatch.setattr(prices, "PRICES_BY_KEY", {})
    usage = TokenUsage(input_tokens=1_000, output_tokens=500, cached_input_tokens=100)
    first = cost_of("openai:gpt-4o", usage)
    again = cost_of("openai:gpt-4o", usage)
    assert first == again and first.priced and first.usd > 0
    assert len(built) == 1
    prices.PRICES_BY_KEY.clear()  # built anew: the same cost
    assert cost_of("openai:gpt-4o", usage) == first
    assert len(built) == 2


def test_a_part_that_costs_nothing_reads_zero_not_zero_to_eight_places() -> None:
    cost = cost_of("openai:gpt-4o", TokenUsage(input_tokens=1000, output_tokens=0))
    assert cost.usd > 0 and str(cost.usd) != "0"
    assert str(cost.output_usd) == str(cost.cached_input_usd) == "0"
    assert '"output_usd":"0"' in cost.model_dump_json()
