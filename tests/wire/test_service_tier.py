"""Each codec reads the service tier a reply says served it into ``TokenUsage.service_tier``
(the provider's word kept, its kind normalized), streamed and whole: Anthropic's
``usage.service_tier``, OpenAI Chat's and Responses' ``service_tier``, Gemini's and Vertex's
``usageMetadata.trafficType`` / ``serviceTier``, Bedrock Converse's ``serviceTier.type``; and
from real recordings of each that has one. Sans-IO but for the recordings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.model.events import MessageComplete
from metis.model.response import TokenUsage
from metis.model.tier import ServiceTier, TierKind, service_tier
from metis.wire.anthropic import codec as anthropic
from metis.wire.bedrock_converse import codec as converse
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import OpenAIChatCodec
from metis.wire.openai_responses import OpenAIResponsesCodec
from tests.helpers import stack_codec
from tests.recordings import ROOT
from tests.wire.test_server_tool_usage import recorded_objects

VERTEX_FLEX = (
    ROOT / "gemini" / "pydantic-ai__test_google__test_google_vertex_service_tier_flex_stream.yaml"
)
RESPONSES_FLEX = (
    ROOT
    / "openai_responses"
    / "pydantic-ai__test_openai_responses__test_openai_responses_streaming_usage.yaml"
)
RESPONSES_AUTO_ECHOED = (
    ROOT
    / "openai_responses"
    / "pydantic-ai__test_openai_responses__test_openai_responses_moderation_stream.yaml"
)
ANTHROPIC_STANDARD = (
    ROOT
    / "anthropic"
    / "pydantic-ai__test_anthropic__test_anthropic_model_thinking_part_stream.yaml"
)


def usage_of(events: Any) -> TokenUsage:
    done = list(events)[-1]
    assert isinstance(done, MessageComplete)
    return done.usage


def streamed(codec: Any, objects: list[dict[str, Any]], provider: str = "p") -> TokenUsage:
    parser = codec.stream_parser(MessageBuilder(provider, f"{provider}:m"))
    return usage_of([e for obj in objects for e in parser.feed(obj)] + list(parser.end()))


def whole(codec: Any, body: dict[str, Any], provider: str = "p") -> TokenUsage:
    return usage_of(codec.parse_body(body, MessageBuilder(provider, f"{provider}:m")))


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("default", TierKind.STANDARD),
        ("standard", TierKind.STANDARD),
        ("ON_DEMAND", TierKind.STANDARD),
        ("flex", TierKind.FLEX),
        ("ON_DEMAND_FLEX", TierKind.FLEX),
        ("priority", TierKind.PRIORITY),
        ("ON_DEMAND_PRIORITY", TierKind.PRIORITY),
        ("fast", TierKind.PRIORITY),
        ("batch", TierKind.BATCH),
        ("scale", TierKind.RESERVED),
        ("reserved", TierKind.RESERVED),
        ("PROVISIONED_THROUGHPUT", TierKind.RESERVED),
        ("ON_DEMAND_OFFPEAK", TierKind.OTHER),
    ],
)
def test_a_providers_word_is_normalized_and_kept(word: str, kind: TierKind) -> None:
    assert service_tier(word) == ServiceTier(kind=kind, raw=word)


@pytest.mark.parametrize("word", [None, "", "auto", "unspecified", "TRAFFIC_TYPE_UNSPECIFIED", 3])
def test_a_word_that_names_no_tier_served_is_none(word: Any) -> None:
    assert service_tier(word) is None


def test_a_word_with_a_lone_surrogate_is_kept_encodable() -> None:
    """A JSON escape can make a lone surrogate (``"\\ud83d"``); the tier then dumps as UTF-8
    (the fuzz suite's hostile strings found it)."""
    tier = service_tier(json.loads('"\\ud83dflex"'))
    assert tier == ServiceTier(kind=TierKind.OTHER, raw="\ufffdflex")
    json.dumps(tier.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")


def anthropic_message(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2, **usage},
    }


def test_anthropic_reads_usage_service_tier_whole_and_streamed() -> None:
    body = anthropic_message({"service_tier": "priority"})
    assert whole(anthropic, body).service_tier == ServiceTier(kind="priority", raw="priority")
    start = {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}}
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 5},  # the delta leaves the tier out: the start's stays
    }
    usage = streamed(anthropic, [start, delta, {"type": "message_stop"}])
    assert usage.service_tier == service_tier("priority")
    assert usage.output_tokens == 5
    assert whole(anthropic, anthropic_message({})).service_tier is None


def chat_body(**top: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-5",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        **top,
    }


def test_openai_chat_reads_the_replys_service_tier_whole_and_streamed() -> None:
    codec = OpenAIChatCodec()
    assert whole(codec, chat_body(service_tier="flex")).service_tier == service_tier("flex")
    assert whole(codec, chat_body()).service_tier is None
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "gpt-5",
        "service_tier": "flex",
    }
    text = {**chunk, "choices": [{"index": 0, "delta": {"content": "Hi."}}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    used = {**chunk, "choices": [], "usage": chat_body()["usage"], "service_tier": "priority"}
    usage = streamed(codec, [text, end, used])
    assert usage.service_tier == service_tier("priority")  # the usage chunk's, read once
    assert usage.input_tokens == 10


def test_openai_chat_stream_with_no_usage_chunk_keeps_the_finish_chunks_tier() -> None:
    """A stream asked without ``include_usage`` names its tier on every chunk and has no usage
    chunk: the tier is read from the chunk that finishes the reply."""
    chunk = {
        "id": "c2",
        "object": "chat.completion.chunk",
        "model": "gpt-5",
        "service_tier": "flex",
    }
    text = {**chunk, "choices": [{"index": 0, "delta": {"content": "Bonjour."}}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = streamed(OpenAIChatCodec(), [text, end])
    assert usage.service_tier == service_tier("flex")
    assert streamed(OpenAIChatCodec(), [text, {**end, "service_tier": None}]).service_tier is None


def responses_events(tier_at_start: str, tier_at_end: str | None) -> list[dict[str, Any]]:
    response = {"id": "resp_1", "object": "response", "model": "gpt-5", "output": []}
    done = {
        **response,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    if tier_at_end is not None:
        done["service_tier"] = tier_at_end
    started = {**response, "status": "in_progress", "service_tier": tier_at_start}
    return [
        {"type": "response.created", "response": started},
        {"type": "response.completed", "response": done},
    ]


def test_openai_responses_reads_the_finished_responses_tier_not_the_requests_echo() -> None:
    codec = OpenAIResponsesCodec()
    assert streamed(codec, responses_events("auto", "default")).service_tier == service_tier(
        "default"
    )
    assert streamed(codec, responses_events("flex", None)).service_tier is None
    body = responses_events("auto", "priority")[1]["response"]
    assert whole(codec, body).service_tier == service_tier("priority")


def gemini_chunk(**usage: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "OK"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1, **usage},
    }


@pytest.mark.parametrize("stack", ["gemini", "vertex"])
def test_gemini_reads_vertex_traffic_type_and_the_gemini_apis_service_tier(stack: str) -> None:
    codec = stack_codec(stack)
    flex = streamed(codec, [gemini_chunk(trafficType="ON_DEMAND_FLEX")], "gemini")
    assert flex.service_tier == ServiceTier(kind=TierKind.FLEX, raw="ON_DEMAND_FLEX")
    priority = whole(codec, gemini_chunk(serviceTier="priority"), "gemini")
    assert priority.service_tier == ServiceTier(kind=TierKind.PRIORITY, raw="priority")
    assert streamed(codec, [gemini_chunk()], "gemini").service_tier is None
    assert whole(codec, gemini_chunk(serviceTier="unspecified")).service_tier is None


def converse_body(**top: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": [{"text": "Hi."}]}
    usage = {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}
    return {"output": {"message": message}, "stopReason": "end_turn", "usage": usage, **top}


def test_bedrock_converse_reads_service_tier_type_whole_and_streamed() -> None:
    body = converse_body(serviceTier={"type": "flex"})
    assert whole(converse, body, "bedrock").service_tier == service_tier("flex")
    assert whole(converse, converse_body(), "bedrock").service_tier is None
    assert whole(converse, converse_body(serviceTier="flex"), "bedrock").service_tier is None
    events = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi."}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
        {"metadata": {"usage": body["usage"], "serviceTier": {"type": "priority"}}},
    ]
    assert streamed(converse, events, "bedrock").service_tier == service_tier("priority")


def test_the_recorded_vertex_flex_stream_is_read_as_flex() -> None:
    usage = streamed(stack_codec("vertex"), recorded_objects(VERTEX_FLEX), "gemini")
    assert usage.service_tier == ServiceTier(kind=TierKind.FLEX, raw="ON_DEMAND_FLEX")
    assert usage.output_tokens == 101  # the counts read as before: candidates plus thoughts


def test_the_recorded_responses_flex_stream_is_read_as_flex() -> None:
    usage = streamed(OpenAIResponsesCodec(), recorded_objects(RESPONSES_FLEX), "openai")
    assert usage.service_tier == ServiceTier(kind=TierKind.FLEX, raw="flex")


def test_a_recorded_responses_stream_that_echoed_auto_is_read_as_served() -> None:
    objects = recorded_objects(RESPONSES_AUTO_ECHOED)
    assert '"service_tier": "auto"' in json.dumps(objects[0])
    usage = streamed(OpenAIResponsesCodec(), objects, "openai")
    assert usage.service_tier == ServiceTier(kind=TierKind.STANDARD, raw="default")


def test_a_recorded_anthropic_stream_is_read_as_standard() -> None:
    usage = streamed(anthropic, recorded_objects(ANTHROPIC_STANDARD), "anthropic")
    assert usage.service_tier == ServiceTier(kind=TierKind.STANDARD, raw="standard")
