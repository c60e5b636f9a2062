"""The gateway prices a reply at the tier that served it and says that tier in the caller's
API: a key's spend and the cost metric take a flex reply's flex price (translated, and passed
through: the relays read the tier beside the usage); Chat Completions and Responses answers
name it in OpenAI's words, Messages API answers in Anthropic's. Sans-IO but for the
recordings."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from metis.cost import cost_of
from metis.gateway.anthropic_write import MessageStream, write_message
from metis.gateway.anthropic_write import usage as anthropic_usage
from metis.gateway.chat_write import ChunkStream, openai_tier, write_completion
from metis.gateway.inbound import Inbound
from metis.gateway.keys import Keys, KeySpec, digest, price
from metis.gateway.metrics import Metrics
from metis.gateway.relay import AnthropicRelay, ChatRelay
from metis.gateway.relay_responses import ResponsesRelay
from metis.gateway.responses_api import ResponseStream
from metis.gateway.responses_items import response_object
from metis.model.content import ProviderRaw, TextBlock
from metis.model.events import MessageComplete, TextDelta
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.model.tier import ServiceTier, TierKind, service_tier
from tests.gateway.test_gateway_server_tool_spend import recorded_body
from tests.wire.test_service_tier import RESPONSES_FLEX

GPT5 = "openai:gpt-5"
TOKENS = TokenUsage(input_tokens=1_000, output_tokens=100)
FLEX = TOKENS.model_copy(update={"service_tier": service_tier("flex")})
END = StopReason(kind=StopKind.END_TURN)


def tiered(word: str | None) -> TokenUsage:
    return TOKENS.model_copy(update={"service_tier": service_tier(word)})


def test_a_flex_reply_is_charged_its_flex_price() -> None:
    charged, standard = price(GPT5, FLEX), price(GPT5, TOKENS)
    assert charged is not None and standard is not None
    assert charged == standard / 2 == cost_of(GPT5, FLEX).usd


@pytest.mark.anyio
async def test_a_keys_budget_is_spent_at_the_flex_price() -> None:
    keys = Keys([KeySpec(name="team", sha256=digest("k"), budget_usd=Decimal(1))], {})
    state = keys.find("k")
    assert state is not None
    await keys.admit(state, "m")
    await keys.release(state, GPT5, FLEX)
    assert await keys.spent("team") == cost_of(GPT5, FLEX).usd < cost_of(GPT5, TOKENS).usd


def test_the_cost_metric_counts_the_flex_price() -> None:
    metrics = Metrics()
    metrics.usage(GPT5, FLEX)
    assert metrics.cost[GPT5] == cost_of(GPT5, FLEX).usd


def chat_body(**top: Any) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-5",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}}],
        "usage": {"prompt_tokens": 1_000, "completion_tokens": 100, "total_tokens": 1_100},
        **top,
    }
    return json.dumps(body).encode()


def test_a_passed_through_chat_reply_is_read_with_its_tier() -> None:
    relay = ChatRelay("gpt", include_usage=True)
    out = relay.whole(chat_body(service_tier="flex"))
    assert json.loads(out)["service_tier"] == "flex"  # relayed as it came
    assert relay.usage == FLEX and price(GPT5, relay.usage) == price(GPT5, FLEX)
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-5"}
    usage = json.loads(chat_body())["usage"]
    streamed = ChatRelay("gpt", include_usage=False)
    last = {**chunk, "choices": [], "usage": usage, "service_tier": "priority"}
    streamed.rewrite(b"data: " + json.dumps(last).encode())
    assert streamed.usage == tiered("priority")


def test_a_passed_through_response_is_read_with_its_tier() -> None:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": [],
        "service_tier": "priority",
        "usage": {"input_tokens": 1_000, "output_tokens": 100},
    }
    relay = ResponsesRelay("gpt", None)
    relay.whole(json.dumps(body).encode())
    assert relay.usage == tiered("priority")


def test_a_passed_through_recorded_flex_stream_is_charged_at_flex() -> None:
    relay = ResponsesRelay("gpt-5", None)
    relay.feed(recorded_body(RESPONSES_FLEX))
    relay.end()
    assert relay.usage is not None
    assert relay.usage.service_tier == ServiceTier(kind=TierKind.FLEX, raw="flex")
    # 53 input tokens at gpt-5's flex $0.625 a million, 469 output at $5: half the standard
    assert (relay.usage.input_tokens, relay.usage.output_tokens) == (53, 469)
    assert price(GPT5, relay.usage) == Decimal("0.00237813")


def test_a_passed_through_anthropic_message_is_read_with_its_tier() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1_000, "output_tokens": 100, "service_tier": "priority"},
    }
    made_by = ProviderRaw(provider="anthropic", model="anthropic:claude-sonnet-4-5")
    relay = AnthropicRelay("sonnet", made_by)
    relay.whole(json.dumps(message).encode())
    assert relay.usage == tiered("priority")


@pytest.mark.parametrize(
    ("word", "openai", "anthropic"),
    [
        (None, None, None),
        ("default", "default", "standard"),
        ("standard", "default", "standard"),
        ("ON_DEMAND_FLEX", "flex", "flex"),
        ("priority", "priority", "priority"),
        ("fast", "fast", "priority"),
        ("scale", "scale", "reserved"),
        ("batch", "batch", "batch"),
        ("ON_DEMAND_OFFPEAK", "ON_DEMAND_OFFPEAK", "ON_DEMAND_OFFPEAK"),
    ],
)
def test_each_api_names_the_tier_in_its_own_words(
    word: str | None, openai: str | None, anthropic: str | None
) -> None:
    assert openai_tier(tiered(word)) == openai
    assert anthropic_usage(tiered(word), True)["service_tier"] == anthropic
    assert "service_tier" not in anthropic_usage(tiered(word))  # a message_delta's has none


def reply(tokens: TokenUsage) -> CanonicalResponse:
    return CanonicalResponse(
        request_id="r",
        model="gpt",
        provider="openai",
        content=[TextBlock(text="Hi.")],
        stop_reason=END,
        usage=tokens,
        latency_ms=0,
    )


def test_a_translated_chat_answer_names_its_tier_whole_and_on_its_last_chunks() -> None:
    assert write_completion(reply(FLEX), "gpt")["service_tier"] == "flex"
    assert "service_tier" not in write_completion(reply(TOKENS), "gpt")
    writer = ChunkStream("gpt", include_usage=True)
    written = writer.feed(TextDelta(0, "Hi.")) + writer.feed(MessageComplete([], END, FLEX))
    chunks = [json.loads(c.removeprefix(b"data: ")) for c in written.split(b"\n\n")[:-2]]
    assert [c.get("service_tier") for c in chunks] == [None, None, "flex", "flex"]
    assert chunks[-1]["usage"]["prompt_tokens"] == 1_000
    asked = ChunkStream("gpt", True, more={"service_tier": "default"})  # the caller's word
    last = asked.feed(MessageComplete([], END, FLEX)).split(b"\n\n")[-3]
    assert json.loads(last.removeprefix(b"data: "))["service_tier"] == "default"


def test_a_translated_messages_stream_makes_up_no_tier() -> None:
    """Anthropic says the tier in ``message_start`` alone (its ``message_delta`` usage has no
    place for it), which a translated stream writes before the upstream's tier is known: null
    there, as the SDK's ``Usage`` allows, not a guess; a whole answer says the real one."""
    anthropic = pytest.importorskip("anthropic")
    writer = MessageStream("claude")
    out = writer.feed(TextDelta(0, "Hi.")) + writer.feed(
        MessageComplete([], END, tiered("priority"))
    )
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in out.split(b"\n\n") if e]
    start = anthropic.types.RawMessageStartEvent.model_validate(events[0])
    assert start.message.usage.service_tier is None
    assert events[0]["message"]["usage"]["service_tier"] is None
    assert [e for e in events if "priority" in json.dumps(e)] == []  # nowhere it has no place
    assert write_message(reply(tiered("priority")), "claude")["usage"]["service_tier"] == "priority"
    assert write_message(reply(TOKENS), "claude")["usage"]["service_tier"] is None


def test_a_translated_response_names_its_tier_once_finished() -> None:
    inbound = Inbound(model="m", messages=[], options={})
    written = response_object(inbound, "m", "resp_1", [], END, tiered("priority"))
    assert written["service_tier"] == "priority"
    assert "service_tier" not in response_object(inbound, "m", "resp_1", [], None, None)
    assert "service_tier" not in response_object(inbound, "m", "resp_1", [], END, TOKENS)
    stream = ResponseStream(inbound, "m", "resp_1")
    out = stream.feed(TextDelta(0, "Hi.")) + stream.feed(MessageComplete([], END, FLEX))
    done = [e for e in out.split(b"\n\n") if b"response.completed" in e]
    assert len(done) == 1
    assert json.loads(done[0].split(b"data: ", 1)[1])["response"]["service_tier"] == "flex"
