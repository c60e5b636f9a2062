"""Anthropic's advisor tool runs a second model within the call: ``usage.iterations`` lists
each ``advisor_message`` pass with its own counts and its own ``model``, which the top-level
counts leave out (they are the executor's ``message`` passes). The canonical usage keeps the
top-level counts as the call's model's and each other model's tokens in ``other_models``;
``cost_of`` prices each at its own model's rates. Read from the real recording
(pydantic-ai's advisor stream) and from whole bodies. Sans-IO but for the recording."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
import yaml

from metis.cost import PriceTable, cost_of
from metis.gateway.anthropic_write import usage as written
from metis.gateway.keys import price
from metis.gateway.relay import AnthropicRelay
from metis.model.content import ProviderRaw
from metis.model.events import MessageComplete
from metis.model.response import ModelUsage, TokenUsage
from metis.sessions.core import add_usage
from metis.wire.anthropic import codec
from metis.wire.builder import MessageBuilder
from tests.recordings import ROOT

RECORDING = (
    ROOT / "anthropic" / "pydantic-ai__test_anthropic__test_anthropic_advisor_tool_stream.yaml"
)
SONNET, OPUS = "anthropic:claude-sonnet-5", "anthropic:claude-opus-4-8"
ADVISOR = ModelUsage(model="claude-opus-4-8", usage=TokenUsage(input_tokens=2543, output_tokens=18))


def recorded_body() -> str:
    cassette = yaml.safe_load(RECORDING.read_text())
    body: str = cassette["interactions"][0]["response"]["body"]["string"]
    return body


def recorded_events() -> list[dict[str, Any]]:
    body = recorded_body()
    lines = (line[5:].strip() for line in body.splitlines() if line.startswith("data:"))
    return [json.loads(line) for line in lines if line]


def final_usage(objects: list[dict[str, Any]]) -> TokenUsage:
    parser = codec.stream_parser(MessageBuilder("anthropic", SONNET))
    events = [event for obj in objects for event in parser.feed(obj)]
    events += parser.end()
    done = events[-1]
    assert isinstance(done, MessageComplete)
    return done.usage


@pytest.mark.skipif(not RECORDING.exists(), reason="the real traffic is not here")
def test_the_recorded_advisor_pass_is_kept_with_its_model() -> None:
    usage = final_usage(recorded_events())
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (2411, 145, 47)
    assert usage.other_models == (ADVISOR,)


@pytest.mark.skipif(not RECORDING.exists(), reason="the real traffic is not here")
def test_the_advisor_is_priced_at_its_own_model() -> None:
    usage = final_usage(recorded_events())
    cost = cost_of(SONNET, usage)
    executor = cost_of(SONNET, usage.model_copy(update={"other_models": ()}))
    advisor = cost_of(OPUS, ADVISOR.usage)
    assert cost.usd == executor.usd + advisor.usd > executor.usd
    assert cost.input_usd == executor.input_usd + advisor.input_usd
    assert cost.output_usd == executor.output_usd + advisor.output_usd
    assert [(c.model, c.usd) for c in cost.other_models] == [(OPUS, advisor.usd)]


def passes(*more: dict[str, Any]) -> dict[str, Any]:
    message = {"type": "message", "input_tokens": 100, "output_tokens": 10}
    counts = {"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    return {
        "input_tokens": 200,
        "output_tokens": 20,
        "iterations": [{**message, **counts}, *more, {**message, **counts}],
    }


def advisor(model: str, tokens: int) -> dict[str, Any]:
    counts = {"cache_read_input_tokens": 5, "cache_creation_input_tokens": 0}
    pass_ = {"type": "advisor_message", "model": model, "input_tokens": tokens, "output_tokens": 3}
    return {**pass_, **counts}


def whole_usage(usage: dict[str, Any]) -> TokenUsage:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [{"type": "text", "text": "4"}],
        "stop_reason": "end_turn",
        "usage": usage,
    }
    events = codec.parse_body(body, MessageBuilder("anthropic", SONNET))
    done = list(events)[-1]
    assert isinstance(done, MessageComplete)
    return done.usage


def test_two_advisor_passes_of_one_model_are_one_entry_and_the_top_counts_stay() -> None:
    usage = whole_usage(passes(advisor("claude-opus-4-8", 50), advisor("claude-opus-4-8", 70)))
    assert (usage.input_tokens, usage.output_tokens) == (200, 20)
    [(model, counts)] = [(o.model, o.usage) for o in usage.other_models]
    assert model == "claude-opus-4-8"
    assert (counts.input_tokens, counts.output_tokens, counts.cached_input_tokens) == (120, 6, 10)


def test_a_reply_without_advisor_passes_has_no_other_models() -> None:
    usage = whole_usage(passes())
    assert usage.other_models == () and "other_models" not in usage.model_dump()


def test_a_session_total_adds_each_model_to_its_own() -> None:
    one = TokenUsage(input_tokens=10, other_models=(ADVISOR,))
    other = ModelUsage(model="claude-opus-4-7", usage=TokenUsage(output_tokens=4))
    total = add_usage(
        add_usage(TokenUsage(), one), one.model_copy(update={"other_models": (ADVISOR, other)})
    )
    assert total.input_tokens == 20
    assert {o.model: o.usage.input_tokens for o in total.other_models} == {
        "claude-opus-4-8": 2 * 2543,
        "claude-opus-4-7": 0,
    }


def test_a_price_table_reprices_the_other_models_too() -> None:
    table = PriceTable.from_dict(
        {
            "pricing_version": "t",
            "models": {SONNET: {"input": 1, "output": 2}, OPUS: {"input": 10, "output": 20}},
        }
    )
    usage = TokenUsage(input_tokens=1_000_000, other_models=(ADVISOR,))
    cost = table.cost(SONNET, usage)
    assert cost.usd == Decimal(1) + (Decimal(2543) * 10 + Decimal(18) * 20) / 1_000_000
    assert table.reprice([(SONNET, usage)]) == [cost]
    assert cost_of(SONNET, usage, table) == cost


@pytest.mark.skipif(not RECORDING.exists(), reason="the real traffic is not here")
def test_a_passed_through_answer_is_relayed_as_it_came_and_charged_the_advisor() -> None:
    """The pass-through relay reads the usage as the translated path does, so the key's
    budget is charged the advisor at its own model's price; the bytes go on untouched."""
    body = recorded_body().encode()
    relay = AnthropicRelay("claude-sonnet-5", ProviderRaw(provider="anthropic", model=SONNET))
    relayed = relay.feed(body) + relay.end()
    assert b'"type":"advisor_message","model":"claude-opus-4-8"' in relayed
    assert relayed.count(b"event: ") == body.count(b"event: ")
    assert relay.usage == final_usage(recorded_events())
    assert (
        relay.usage is not None and price(SONNET, relay.usage) == cost_of(SONNET, relay.usage).usd
    )
    executor = relay.usage.model_copy(update={"other_models": ()})
    assert (
        price(SONNET, relay.usage)
        == cost_of(SONNET, executor).usd + cost_of(OPUS, ADVISOR.usage).usd
    )


def test_a_translated_anthropic_reply_lists_the_advisor_pass_in_iterations() -> None:
    """The Messages API can say it: ``usage.iterations``, the call's own counts as its
    ``message`` pass and each other model's as an ``advisor_message`` pass naming it."""
    tokens = TokenUsage(input_tokens=200, output_tokens=20, other_models=(ADVISOR,))
    for whole in (True, False):
        out = written(tokens, whole)
        assert (out["input_tokens"], out["output_tokens"]) == (200, 20)
        message, advised = out["iterations"]
        assert message["type"] == "message" and message["input_tokens"] == 200
        assert advised == {
            "type": "advisor_message",
            "model": "claude-opus-4-8",
            "input_tokens": 2543,
            "output_tokens": 18,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
    assert "iterations" not in written(TokenUsage(input_tokens=3), True)
