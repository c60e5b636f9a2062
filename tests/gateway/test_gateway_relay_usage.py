"""The usage a pass-through relay reads of an Anthropic answer is the one the translated path
reads (metis/wire/anthropic/usage.py, docs/contract.md §5), for the key's budget and the
metrics: a compaction pass that ``usage.iterations`` lists apart is added to the top-level
counts (they are the message passes' only), whether ``message_start`` or ``message_delta``
names it, and the thinking tokens ``output_tokens_details`` gives are the reasoning part."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.gateway.relay import AnthropicRelay, ChatRelay
from metis.gateway.relay_responses import ResponsesRelay
from metis.model.content import ProviderRaw
from metis.model.response import TokenUsage
from metis.wire.anthropic import AnthropicCodec

COMPACTION = {
    "type": "compaction",
    "input_tokens": 1000,
    "output_tokens": 200,
    "cache_read_input_tokens": 50,
    "cache_creation_input_tokens": 7,
}
MESSAGE_PASS = {"type": "message", "input_tokens": 40, "output_tokens": 30}
START = {"input_tokens": 40, "output_tokens": 1, "cache_read_input_tokens": 0}
START["cache_creation_input_tokens"] = 0  # as Anthropic sends them: every count named


def sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def stream(start_usage: dict[str, Any], end_usage: dict[str, Any]) -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x"}
    block = {"type": "text", "text": ""}
    return b"".join(
        [
            sse("message_start", {"message": {**message, "content": [], "usage": start_usage}}),
            sse("content_block_start", {"index": 0, "content_block": block}),
            sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
            sse("content_block_stop", {"index": 0}),
            sse("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": end_usage}),
            sse("message_stop", {}),
        ]
    )


def translated(body: bytes) -> TokenUsage:
    """What the translated path's reader makes of the same stream."""
    codec = AnthropicCodec()
    parser = codec.stream_parser(_builder())
    usage: TokenUsage | None = None
    for obj in _objects(body):
        for event in parser.feed(obj):
            usage = getattr(event, "usage", usage)
    assert usage is not None
    return usage


def _builder() -> Any:
    from metis.wire.builder import MessageBuilder

    return MessageBuilder("anthropic", "claude-x")


def _objects(body: bytes) -> list[dict[str, Any]]:
    found = []
    for raw in body.split(b"\n\n"):
        for line in raw.split(b"\n"):
            if line.startswith(b"data:"):
                found.append(json.loads(line[5:]))
    return found


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "iterations in message_delta": (
        START,
        {"input_tokens": 40, "output_tokens": 30, "iterations": [COMPACTION, MESSAGE_PASS]},
    ),
    "iterations in message_start only": (
        {**START, "iterations": [COMPACTION, MESSAGE_PASS]},
        {"output_tokens": 30},
    ),
    "thinking tokens": (
        START,
        {"output_tokens": 30, "output_tokens_details": {"thinking_tokens": 12}},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_relay_reads_the_usage_the_translated_path_reads(case: str) -> None:
    body = stream(*CASES[case])
    relay = AnthropicRelay("sonnet", ProviderRaw(provider="anthropic", model="anthropic:x"))
    relayed = relay.feed(body) + relay.end()
    assert relayed.count(b"event: ") == body.count(b"event: ")
    assert relay.usage == translated(body)


def test_a_whole_answer_adds_its_compaction_pass() -> None:
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {**START, "output_tokens": 30, "iterations": [COMPACTION, MESSAGE_PASS]},
    }
    relay = AnthropicRelay("sonnet", ProviderRaw(provider="anthropic", model="anthropic:x"))
    relay.whole(json.dumps(answer).encode())
    assert relay.usage == TokenUsage(
        input_tokens=1040, output_tokens=230, cached_input_tokens=50, cache_creation_input_tokens=7
    )


CHAT_USAGES: dict[str, dict[str, Any]] = {
    "DeepSeek's cache hits": {
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "prompt_cache_hit_tokens": 60,
        "prompt_cache_miss_tokens": 40,
    },
    "cache writes (OpenRouter)": {
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 30},
    },
    "reasoning left out of the completion (xAI)": {
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "total_tokens": 135,
        "completion_tokens_details": {"reasoning_tokens": 25},
    },
    "a prompt count without its cached part (Azure's Grok)": {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 90},
    },
}


def chat_translated(usage: dict[str, Any]) -> TokenUsage:
    from metis.wire.builder import MessageBuilder
    from metis.wire.openai_chat.read import read_usage

    builder = MessageBuilder("openai", "gpt-x")
    read_usage(builder, usage)
    return builder.token_usage()


@pytest.mark.parametrize("case", CHAT_USAGES)
def test_the_chat_relay_reads_the_usage_the_translated_path_reads(case: str) -> None:
    usage = CHAT_USAGES[case]
    chunk = {"id": "c1", "model": "x", "choices": [], "usage": usage}
    relay = ChatRelay("fast", include_usage=True)
    relay.feed(f"data: {json.dumps(chunk)}\n\n".encode() + b"data: [DONE]\n\n")
    assert relay.usage == chat_translated(usage)
    whole = ChatRelay("fast", include_usage=True)
    whole.whole(json.dumps({**chunk, "choices": [{"index": 0, "finish_reason": "stop"}]}).encode())
    assert whole.usage == chat_translated(usage)


def test_the_responses_relay_reads_cache_writes_as_the_translated_path_does() -> None:
    usage = {
        "input_tokens": 100,
        "output_tokens": 10,
        "input_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 30},
        "output_tokens_details": {"reasoning_tokens": 4},
    }
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "x"}
    relay = ResponsesRelay("fast", None)
    relay.whole(json.dumps({**response, "output": [], "usage": usage}).encode())
    assert relay.usage == TokenUsage(
        input_tokens=50,
        output_tokens=10,
        cached_input_tokens=20,
        cache_creation_input_tokens=30,
        reasoning_tokens=4,
    )


def test_a_relay_given_counts_that_are_not_counts_reads_none_and_relays_on() -> None:
    chunk = {"id": "c1", "model": "x", "choices": [], "usage": {"prompt_tokens": "many"}}
    relay = ChatRelay("fast", include_usage=True)
    out = relay.feed(f"data: {json.dumps(chunk)}\n\n".encode())
    assert b'"many"' in out
    assert relay.usage == TokenUsage()
