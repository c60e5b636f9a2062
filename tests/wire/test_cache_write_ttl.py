"""Cache writes by how long they are kept: Anthropic's ``usage.cache_creation``
(``ephemeral_5m_input_tokens``, ``ephemeral_1h_input_tokens``) and Bedrock Converse's
``usage.cacheDetails`` (``[{ttl, inputTokens}]``) are read, whole and streamed, as
``TokenUsage.cache_creation_1h_input_tokens`` (the part of ``cache_creation_input_tokens`` kept
an hour), priced at twice the input rate where a five-minute write is the catalog's
``cache_write`` (1.25 times), charged so by ``metis serve``'s keys, and written back to
Anthropic clients as ``cache_creation`` per lifetime. Sans-IO."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from metis.cost import PriceTable, cost_of
from metis.errors import ProtocolError
from metis.gateway.anthropic_write import usage as written
from metis.gateway.keys import price
from metis.model.response import TokenUsage
from metis.wire.anthropic import codec as anthropic
from metis.wire.bedrock_converse import codec as converse
from tests.wire.test_service_tier import anthropic_message, converse_body, streamed, whole

SONNET = "anthropic:claude-sonnet-4-5"  # input 3, cache_write 3.75 USD per million
BEDROCK_SONNET = "bedrock:global.anthropic.claude-sonnet-4-5-20250929-v1:0"  # the same
WRITES = {"ephemeral_5m_input_tokens": 6000, "ephemeral_1h_input_tokens": 4000}
ANTHROPIC_USAGE = {
    "cache_creation_input_tokens": 10000,
    "cache_read_input_tokens": 0,
    "cache_creation": WRITES,
}
# 1000 * 3 + 100 * 15 + 6000 * 3.75 + 4000 * 6, per million
PRICE = Decimal("0.051")


def anthropic_stream(usage: dict[str, Any]) -> list[dict[str, Any]]:
    body = anthropic_message(usage)
    start = {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}}
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 100},  # the delta leaves the writes out: the start's stay
    }
    return [start, delta, {"type": "message_stop"}]


def test_anthropic_reads_the_hour_writes_whole_and_streamed() -> None:
    body = anthropic_message(ANTHROPIC_USAGE)
    usage = whole(anthropic, body, "anthropic")
    assert (usage.cache_creation_input_tokens, usage.cache_creation_1h_input_tokens) == (
        10000,
        4000,
    )
    usage = streamed(anthropic, anthropic_stream(ANTHROPIC_USAGE), "anthropic")
    assert (usage.cache_creation_input_tokens, usage.cache_creation_1h_input_tokens) == (
        10000,
        4000,
    )
    assert usage.output_tokens == 100
    alone = whole(anthropic, anthropic_message({"cache_creation_input_tokens": 5}), "anthropic")
    assert alone.cache_creation_1h_input_tokens == 0
    assert "cache_creation_1h_input_tokens" not in alone.model_dump()


@pytest.mark.parametrize("bad", ["many", -1.5, [4000]])
def test_an_anthropic_hour_count_that_is_not_a_count_is_a_protocol_error(bad: Any) -> None:
    usage = {**ANTHROPIC_USAGE, "cache_creation": {"ephemeral_1h_input_tokens": bad}}
    with pytest.raises(ProtocolError, match="ephemeral_1h_input_tokens"):
        whole(anthropic, anthropic_message(usage), "anthropic")


def test_an_hour_write_costs_twice_the_input_rate() -> None:
    usage = TokenUsage(
        input_tokens=1000,
        output_tokens=100,
        cache_creation_input_tokens=10000,
        cache_creation_1h_input_tokens=4000,
    )
    cost = cost_of(SONNET, usage)
    assert cost.cache_creation_usd == Decimal("0.0465")
    assert cost.usd == PRICE
    five_minutes = cost_of(SONNET, usage.model_copy(update={"cache_creation_1h_input_tokens": 0}))
    assert cost.usd - five_minutes.usd == 4000 * (Decimal(6) - Decimal("3.75")) / 1_000_000
    read = whole(anthropic, anthropic_message(ANTHROPIC_USAGE), "anthropic")
    assert cost_of(SONNET, read).usd == Decimal("0.04656")  # 10 in, 2 out: 30 + 30 + 46500
    assert price(SONNET, usage) == PRICE  # what metis serve charges a key's budget


def test_an_hour_count_over_the_writes_is_priced_as_all_writes_kept_an_hour() -> None:
    usage = TokenUsage(cache_creation_input_tokens=100, cache_creation_1h_input_tokens=500)
    assert cost_of(SONNET, usage).usd == Decimal("0.0006")


def test_an_hour_write_is_never_cheaper_than_the_tables_five_minute_write() -> None:
    table = PriceTable.from_dict(
        {
            "pricing_version": "t",
            "models": {"p:m": {"input": 1, "output": 1, "cache_creation": 5}},
        }
    )
    usage = TokenUsage(cache_creation_input_tokens=10, cache_creation_1h_input_tokens=10)
    assert table.cost("p:m", usage).usd == Decimal("0.00005")


def test_a_batch_halves_the_hour_writes_too() -> None:
    usage = TokenUsage(cache_creation_input_tokens=1000, cache_creation_1h_input_tokens=1000)
    assert cost_of(SONNET, usage).usd == Decimal("0.006")
    assert cost_of(SONNET, usage, batch=True).usd == Decimal("0.003")


def test_a_sum_adds_the_hour_writes() -> None:
    one = TokenUsage(cache_creation_input_tokens=10, cache_creation_1h_input_tokens=4)
    assert one.plus(one).cache_creation_1h_input_tokens == 8


def converse_usage(*details: dict[str, Any]) -> dict[str, Any]:
    usage = {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 11100}
    return {**usage, "cacheWriteInputTokens": 10000, "cacheDetails": list(details)}


CONVERSE_DETAILS = ({"ttl": "5m", "inputTokens": 6000}, {"ttl": "1h", "inputTokens": 4000})


def test_bedrock_converse_reads_the_hour_writes_whole_and_streamed() -> None:
    body = converse_body(usage=converse_usage(*CONVERSE_DETAILS))
    usage = whole(converse, body, "bedrock")
    assert (usage.cache_creation_input_tokens, usage.cache_creation_1h_input_tokens) == (
        10000,
        4000,
    )
    events = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi."}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
        {"metadata": {"usage": body["usage"]}},
    ]
    assert streamed(converse, events, "bedrock") == usage
    assert cost_of(BEDROCK_SONNET, usage).usd == PRICE
    five = whole(converse, converse_body(usage=converse_usage(CONVERSE_DETAILS[0])), "bedrock")
    assert five.cache_creation_1h_input_tokens == 0


def test_bedrock_cache_details_that_are_not_a_list_are_a_protocol_error() -> None:
    body = converse_body(usage={**converse_usage(), "cacheDetails": {"ttl": "1h"}})
    with pytest.raises(ProtocolError, match="cacheDetails"):
        whole(converse, body, "bedrock")


def test_the_gateway_writes_the_writes_back_by_lifetime() -> None:
    usage = TokenUsage(
        input_tokens=10, cache_creation_input_tokens=10000, cache_creation_1h_input_tokens=4000
    )
    assert written(usage, True)["cache_creation"] == WRITES
    assert written(TokenUsage(cache_creation_input_tokens=7), True)["cache_creation"] == {
        "ephemeral_5m_input_tokens": 7,
        "ephemeral_1h_input_tokens": 0,
    }
