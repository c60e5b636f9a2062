"""Anthropic's ``usage.speed`` (``fast``: fast mode) and ``usage.inference_geo`` (``us``:
US-only inference) are read, whole and streamed, as ``TokenUsage.speed`` and
``.inference_geo``; ``cost_of`` prices a fast call at the table's fast-mode multiple (the
catalog's: Anthropic's published ones), else at ``FAST_MODE`` (2) times the standard rates
with ``Cost.rate_assumed`` saying so, and a US-only
call at 1.1 times the rates of the Anthropic models released from February 2026; ``metis
serve`` charges keys so and writes both back to Anthropic clients. Sans-IO."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from metis.cost import PriceTable, cost_of
from metis.errors import ProtocolError
from metis.gateway.anthropic_write import usage as written
from metis.gateway.keys import price
from metis.model.response import TokenUsage
from metis.wire.anthropic import codec as anthropic
from tests.wire.test_advisor_usage import RECORDING, SONNET, final_usage, recorded_events
from tests.wire.test_cache_write_ttl import anthropic_stream
from tests.wire.test_service_tier import anthropic_message, streamed, whole

OPUS_4_6 = "anthropic:claude-opus-4-6"  # input 5, output 25 USD per million; February 2026
SONNET_4_5 = "anthropic:claude-sonnet-4-5"  # September 2025
RAN = {"speed": "fast", "inference_geo": "us"}
CALL = TokenUsage(input_tokens=1000, output_tokens=100)  # 0.0075 USD at Opus 4.6's rates


def test_anthropic_reads_speed_and_place_whole_and_streamed() -> None:
    usage = whole(anthropic, anthropic_message(RAN), "anthropic")
    assert (usage.speed, usage.inference_geo) == ("fast", "us")
    usage = streamed(anthropic, anthropic_stream(RAN), "anthropic")
    assert (usage.speed, usage.inference_geo, usage.output_tokens) == ("fast", "us", 100)
    said = whole(anthropic, anthropic_message({}), "anthropic")
    assert (said.speed, said.inference_geo) == (None, None)
    assert not {"speed", "inference_geo"} & set(said.model_dump())


def test_words_that_are_not_utf8_text_are_kept_with_a_replacement_character() -> None:
    said = {"speed": "fast \ud83d", "inference_geo": "\ude00us"}  # lone surrogates, as JSON reads
    usage = whole(anthropic, anthropic_message(said), "anthropic")
    assert (usage.speed, usage.inference_geo) == ("fast \ufffd", "\ufffdus")
    usage = streamed(anthropic, anthropic_stream(said), "anthropic")
    assert (usage.speed, usage.inference_geo) == ("fast \ufffd", "\ufffdus")
    usage.model_dump_json()  # encodable


def test_a_speed_that_is_not_text_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="speed"):
        whole(anthropic, anthropic_message({"speed": 2}), "anthropic")


def test_a_fast_call_is_priced_at_the_models_published_multiple() -> None:
    fast = CALL.model_copy(update={"speed": "fast"})
    cost = cost_of(OPUS_4_6, fast)
    assert cost.usd == Decimal("0.045") == 6 * cost_of(OPUS_4_6, CALL).usd
    assert cost.rate_assumed is None
    assert price(OPUS_4_6, fast) == Decimal("0.045")  # what metis serve charges a key
    standard = cost_of(OPUS_4_6, CALL.model_copy(update={"speed": "standard"}))
    assert (standard.usd, standard.rate_assumed) == (Decimal("0.0075"), None)
    for later in (
        "anthropic:claude-opus-4-8",
        "anthropic:claude-opus-5",
        "anthropic:claude-opus-5-5",
    ):
        priced = cost_of(later, fast)
        assert (priced.usd, priced.rate_assumed) == (2 * cost_of(later, CALL).usd, None)


def test_a_fast_call_of_a_model_with_no_published_multiple_says_it_assumed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fable = "anthropic:claude-fable-5-2"
    with caplog.at_level(logging.WARNING, logger="metis"):
        cost = cost_of(fable, CALL.model_copy(update={"speed": "fast"}))
    assert cost.usd == 2 * cost_of(fable, CALL).usd
    assert cost.rate_assumed is not None and "2 times" in cost.rate_assumed
    assert any(getattr(r, "event", None) == "metis.assumed_rate" for r in caplog.records)


def test_a_tables_fast_multiple_is_used_and_assumes_nothing() -> None:
    table = PriceTable.from_dict(
        {"pricing_version": "t", "models": {"p:m": {"input": 5, "output": 25, "fast": 2}}}
    )
    cost = table.cost("p:m", CALL.model_copy(update={"speed": "fast"}))
    assert (cost.usd, cost.rate_assumed) == (Decimal("0.015"), None)


def test_us_only_inference_is_a_tenth_more_from_february_2026() -> None:
    us = CALL.model_copy(update={"inference_geo": "us"})
    assert cost_of(OPUS_4_6, us).usd == Decimal("0.00825")
    assert cost_of(OPUS_4_6, us.model_copy(update={"inference_geo": "global"})).usd == Decimal(
        "0.0075"
    )
    assert cost_of(SONNET_4_5, us).usd == cost_of(SONNET_4_5, CALL).usd  # released before
    both = cost_of(OPUS_4_6, us.model_copy(update={"speed": "fast"}))
    assert both.usd == Decimal("0.0495")  # 0.0075 * 6 * 1.1


def test_a_sum_keeps_speed_and_place_only_where_both_agree() -> None:
    fast = CALL.model_copy(update=RAN)
    assert (fast.plus(fast).speed, fast.plus(fast).inference_geo) == ("fast", "us")
    mixed = fast.plus(CALL)
    assert (mixed.speed, mixed.inference_geo) == (None, None)
    assert TokenUsage().plus(fast).speed == "fast"


def test_the_gateway_writes_speed_and_place_back_where_known() -> None:
    assert {k: written(CALL.model_copy(update=RAN), True)[k] for k in RAN} == RAN
    assert not {"speed", "inference_geo"} & set(written(CALL, True))
    assert "speed" not in written(CALL.model_copy(update=RAN))  # message_delta: not there


@pytest.mark.skipif(not RECORDING.exists(), reason="the real traffic is not here")
def test_a_recorded_global_place_is_read_and_priced_as_the_standard_rates() -> None:
    usage = final_usage(recorded_events())  # message_start's usage says inference_geo global
    assert (usage.inference_geo, usage.speed) == ("global", None)
    anywhere = usage.model_copy(update={"inference_geo": None})
    assert cost_of(SONNET, usage).usd == cost_of(SONNET, anywhere).usd
    us = cost_of(SONNET, usage.model_copy(update={"inference_geo": "us"}))
    assert us.usd > cost_of(SONNET, anywhere).usd  # a model with no release date: the newest
