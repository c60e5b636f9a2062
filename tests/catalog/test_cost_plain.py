"""A cost prints and serializes as a plain decimal, however small (never ``3.6E-7``)."""

from __future__ import annotations

import json
from decimal import Decimal

from metis.cost import Cost, PriceTable, cost_of
from metis.model.response import TokenUsage
from metis.sessions.events import RunResult

TABLE = PriceTable.from_dict(
    {"pricing_version": "t1", "models": {"openai:tiny": {"input": 0.12, "output": 0.6}}}
)
THREE_TOKENS = TokenUsage(input_tokens=3, output_tokens=0)


def test_a_cost_below_a_millionth_prints_as_a_plain_decimal() -> None:
    cost = TABLE.cost("openai:tiny", THREE_TOKENS)
    assert cost.usd == Decimal("0.00000036")
    assert str(cost.usd) == "0.00000036"
    assert f"{cost.usd}" == "0.00000036"
    assert f"cost: {cost.input_usd}" == "cost: 0.00000036"
    assert str(cost.output_usd) == "0"
    assert f"{cost.usd:.2f}" == "0.00"  # an explicit format is the caller's


def test_a_small_cost_serializes_as_a_plain_decimal_and_reads_back() -> None:
    cost = TABLE.cost("openai:tiny", THREE_TOKENS)
    data = json.loads(cost.model_dump_json())
    assert data["usd"] == data["input_usd"] == "0.00000036"
    assert cost.model_dump(mode="json")["usd"] == "0.00000036"
    again = Cost.model_validate_json(cost.model_dump_json())
    assert again == cost and str(again.usd) == "0.00000036"


def test_a_batch_cost_and_a_catalog_cost_print_plain() -> None:
    batch = cost_of("openai:gpt-4o-mini", TokenUsage(input_tokens=1, output_tokens=0), batch=True)
    assert batch.usd > 0 and "E" not in str(batch.usd)
    assert str(batch.usd) == format(batch.usd, "f")


def test_a_runs_summed_cost_prints_plain() -> None:
    cost = TABLE.cost("openai:tiny", THREE_TOKENS)
    result = RunResult.__new__(RunResult)
    object.__setattr__(result, "costs", (cost, cost))
    assert str(result.cost_usd) == "0.00000072"


def test_amounts_a_caller_adds_up_stay_plain() -> None:
    small = TABLE.cost("openai:tiny", THREE_TOKENS).usd
    totals = [
        small + small,
        sum([small, small, small]),
        small - small * 2,
        Decimal("0.0000001") - small,
        small * 3,
        2 * small,
        small / 4,
        -small,
        abs(-small),
    ]
    assert [str(total) for total in totals] == [
        "0.00000072",
        "0.00000108",
        "-0.00000036",
        "-0.00000026",
        "0.00000108",
        "0.00000072",
        "0.00000009",
        "-0.00000036",
        "0.00000036",
    ]
    assert all(type(total).__name__ == "USD" for total in totals)


def test_a_ratio_or_product_of_two_amounts_is_no_amount() -> None:
    small = TABLE.cost("openai:tiny", THREE_TOKENS).usd
    ratio, square = small / small, small * small
    assert type(ratio) is Decimal and ratio == 1
    assert type(square) is Decimal and square == Decimal("1.296E-13")
