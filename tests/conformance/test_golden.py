"""The golden behaviours (text, tools, errors, usage) of every adapter, over cassettes.

The cassettes in cassettes/<provider>/ hold the exact wire request each adapter must send
(the replay transport refuses any other) and a reply cut at awkward chunk boundaries. The
expected canonical results below are written out by hand from those replies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    StreamEvent,
    TextBlock,
    ToolDefinition,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.testing.cassette import Cassette, ReplayTransport
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec

from ..helpers import make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

CASSETTES = Path(__file__).parents[2] / "cassettes"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4o"}
TEXT = "I'll check both cities — Paris and Rome."
# Rome's unit is absent on OpenAI: strict mode made the model send null for the optional
# field, and the strict_schema stage gives the caller back its own schema's meaning.
TOOL_INPUTS = {
    "anthropic": [{"city": "Paris", "unit": "celsius"}, {"city": "Rome", "unit": "celsius"}],
    "openai": [{"city": "Paris", "unit": "celsius"}, {"city": "Rome"}],
}
RAW_STOP = {"anthropic": "tool_use", "openai": "tool_calls"}
USAGE = {
    # Anthropic reports uncached input separately: 412 + 1024 read + 128 written.
    "anthropic": {
        "input_tokens": 412,
        "output_tokens": 87,
        "cached_input_tokens": 1024,
        "cache_creation_input_tokens": 128,
        "reasoning_tokens": 0,
    },
    # OpenAI's prompt_tokens (1564) include the 1024 cached; canonical input is the rest.
    "openai": {
        "input_tokens": 540,
        "output_tokens": 87,
        "cached_input_tokens": 1024,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 0,
    },
}
PROVIDERS = ["anthropic", "openai"]


def request(provider: str, stream: bool) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS[provider],
        session_id="golden",
        system_prompt="You are a weather assistant.",
        messages=[Message.user("What's the weather in Paris and in Rome, in Celsius?")],
        tools=[WEATHER],
        max_output_tokens=1024,
        temperature=0.2,
        stream=stream,
    )


def adapter(provider: str, cassette: str) -> tuple[Any, ReplayTransport]:
    replay = ReplayTransport(CASSETTES / provider / cassette)
    config = AdapterConfig(api_key="sk-test-key", http_client=httpx.AsyncClient(transport=replay))
    return build_adapter(provider, config, tool_id_store=InMemoryToolIdStore()), replay


async def streamed(provider: str) -> list[StreamEvent]:
    a, replay = adapter(provider, "tool_call_stream.yaml")
    events = [e async for e in a.stream(request(provider, stream=True))]
    assert replay.remaining == 0
    return events


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_round_trip_canonical_to_wire_to_canonical(provider: str) -> None:
    """the wire request equals the cassette's (the replay checks it) and the
    reply comes back as the canonical content written out above."""
    final = (await streamed(provider))[-1]
    assert isinstance(final, MessageComplete)
    assert [type(b) for b in final.final_content] == [TextBlock, ToolUseBlock, ToolUseBlock]
    text, *calls = final.final_content
    assert isinstance(text, TextBlock) and text.text == TEXT
    assert [(c.name, c.input) for c in calls if isinstance(c, ToolUseBlock)] == [
        ("get_weather", expected) for expected in TOOL_INPUTS[provider]
    ]
    assert all(c.id.startswith("tu_") for c in calls if isinstance(c, ToolUseBlock))
    assert final.stop_reason.kind is StopKind.TOOL_USE
    assert final.stop_reason.raw == RAW_STOP[provider]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_event_sequence_keeps_the_invariants(provider: str) -> None:
    """Streamed or not, the same behaviour (docs/contract.md §2)."""
    events = await streamed(provider)
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    kinds = [e.type for e in events]
    assert kinds[0] == "message.start" and kinds[-1] == "message.complete"
    assert kinds.count("tool.use_start") == kinds.count("tool.use_end") == 2
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    assert [e.tool_use_id for e in starts] == [e.tool_use_id for e in ends]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_partial_json_is_the_raw_provider_fragment(provider: str) -> None:
    """the fragments are the provider's, byte for byte, not parsed objects."""
    events = await streamed(provider)
    fragments: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, ToolUseInputDelta):
            fragments.setdefault(event.tool_use_id, []).append(event.partial_json)
    assert list(fragments.values()) == raw_fragments(provider)


def raw_fragments(provider: str) -> list[list[str]]:
    """The non-empty argument fragments, read straight from the cassette's body."""
    cassette = Cassette.load(CASSETTES / provider / "tool_call_stream.yaml")
    body = b"".join(cassette.interactions[0].response.body_chunks()).decode()
    out: dict[int, list[str]] = {}
    for line in body.splitlines():
        if not line.startswith("data: {"):
            continue
        obj = json.loads(line[6:])
        if provider == "anthropic" and obj["type"] == "content_block_delta":
            if obj["delta"]["type"] == "input_json_delta" and obj["delta"]["partial_json"]:
                out.setdefault(obj["index"], []).append(obj["delta"]["partial_json"])
        elif provider == "openai":
            for choice in obj["choices"]:
                for call in choice["delta"].get("tool_calls") or []:
                    if call["function"].get("arguments"):
                        out.setdefault(call["index"], []).append(call["function"]["arguments"])
    return list(out.values())


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_all_four_token_counts_are_mapped(provider: str) -> None:
    """Streamed or not, the same behaviour (docs/contract.md §2)."""
    final = (await streamed(provider))[-1]
    assert isinstance(final, MessageComplete)
    assert final.usage.model_dump(exclude={"estimated"}) == USAGE[provider]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_streamed_and_complete_calls_agree_on_content_and_usage(provider: str) -> None:
    """usage (and everything else) is the same streamed or not."""
    final = (await streamed(provider))[-1]
    a, replay = adapter(provider, "tool_call.yaml")
    response = await a.complete(request(provider, stream=False))
    assert replay.remaining == 0
    assert isinstance(final, MessageComplete)
    assert response.usage == final.usage
    assert response.stop_reason == final.stop_reason
    assert _without_ids(response.content) == _without_ids(final.final_content)
    assert response.message_id == final.message_id


def _without_ids(content: list[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(exclude={"id"}) for block in content]


SHAPES: list[dict[str, Any]] = [
    {},
    {"s": 'text with "quotes", a newline\n and ünïcödé ✓', "i": 42, "f": -3.25, "t": True},
    {"f": False, "n": None, "big": 12345678901234567890, "small": 1e-9},
    {"nested": {"deep": {"deeper": [1, [2, [3]], {"k": "v"}]}}, "empty": {"a": [], "b": {}}},
    {"list": [{"x": 1}, {"x": 2, "y": [True, None, "z"]}], "mixed": [1, "two", 3.0, None]},
]


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"shape{i}" for i in range(len(SHAPES))])
def test_tool_call_inputs_of_every_shape_survive_the_wire_both_ways(
    provider: str, shape: dict[str, Any]
) -> None:
    """canonical ToolUseBlock -> wire -> canonical is identity."""
    codec = get_codec(provider)
    call = make_call(provider=provider)
    block = ToolUseBlock(id="toolu_1", name="probe", input=shape)
    history = CanonicalRequest(
        model="m",
        messages=[Message.user("go"), Message.assistant(block)],
        max_output_tokens=10,
    )
    wire = codec.encode(history, call)
    assistant = wire["messages"][-1]
    if provider == "anthropic":
        sent = assistant["content"][0]
        reply = {
            "id": "msg_1", "model": "m", "content": [sent], "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }  # fmt: skip
    else:
        sent = assistant["tool_calls"][0]
        assert isinstance(sent["function"]["arguments"], str)
        reply = {
            "id": "c1", "model": "m", "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [sent]}}],
        }  # fmt: skip
    final = codec.parse_body(json.loads(json.dumps(reply)), MessageBuilder(provider, "m"))[-1]
    assert isinstance(final, MessageComplete)
    (parsed,) = final.final_content
    assert isinstance(parsed, ToolUseBlock)
    assert parsed.input == shape
    assert parsed.id == "toolu_1" and parsed.name == "probe"
