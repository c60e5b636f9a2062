"""The usage a pass-through relay reads of an Anthropic answer is the one the translated path
reads (metis/wire/anthropic/usage.py, docs/contract.md §5), for the key's budget and the
metrics: a compaction pass that ``usage.iterations`` lists apart is added to the top-level
counts (they are the message passes' only), whether ``message_start`` or ``message_delta``
names it, and the thinking tokens ``output_tokens_details`` gives are the reasoning part."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.gateway.relay import AnthropicRelay
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
