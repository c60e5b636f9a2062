"""The reasoning part of a call's output at its own rate, with cached input, cache writes and
a long-prompt tier in the same usage; a usage that says more reasoning than output (a
provider that counts reasoning apart and is not read so, a usage made by hand) is never a
negative amount: the output is what is billed, all of it reasoning at most."""

from __future__ import annotations

from decimal import Decimal

from metis.cost import PriceTable
from metis.model.response import TokenUsage

TABLE = PriceTable.from_dict(
    {
        "pricing_version": "t",
        "models": {
            "x:thinker": {
                "input": 2,
                "output": 10,
                "reasoning": 4,
                "cached_input": 0.5,
                "cache_creation": 2.5,
                "tiers": [{"above_input_tokens": 1000, "input": 3, "output": 20}],
            }
        },
    }
)


def test_reasoning_cache_and_a_tier_in_one_usage() -> None:
    usage = TokenUsage(
        input_tokens=600,
        output_tokens=300,
        reasoning_tokens=200,
        cached_input_tokens=500,
        cache_creation_input_tokens=100,
    )
    cost = TABLE.cost("x:thinker", usage)  # 1,200 input tokens in all: the tier's rates
    assert cost.input_usd == Decimal("0.0018")  # 600 at 3
    assert cost.output_usd == Decimal("0.0028")  # 100 at 20, 200 at 4
    assert cost.cached_input_usd == Decimal("0.00025")
    assert cost.cache_creation_usd == Decimal("0.00025")
    assert cost.usd == Decimal("0.0051")


def test_more_reasoning_than_output_is_the_output_all_reasoning_never_negative() -> None:
    usage = TokenUsage(input_tokens=0, output_tokens=5, reasoning_tokens=100)
    cost = TABLE.cost("x:thinker", usage)
    assert cost.output_usd == Decimal("0.00002")  # the 5 output tokens, at the reasoning rate
    assert cost.usd == cost.output_usd
