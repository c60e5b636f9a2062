"""The golden behaviours (text, tools, errors, usage) of the openai_responses adapter, over the
committed cassettes in cassettes/openai_responses/, plus the continuation turn.

The cassettes hold the exact wire requests the adapter must send (the replay transport refuses
any other; the second request of tool_call_stream.yaml is the continued one) and replies cut at
awkward chunk boundaries. The expected canonical results below are written out by hand from
those replies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    Role,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
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

CASSETTES = Path(__file__).parents[2] / "cassettes" / "openai_responses"
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
MODEL = "openai_responses:gpt-5"
THINKING = (
    "**Planning the lookups**\n\nThe user wants Paris and Rome in Celsius: two calls."
    "\n\n**Calling the tool**\n\nBoth cities at once."
)
ENCRYPTED = "gAAAAABoGoldenDoneQk7pR2sV9yEncryptedReasoningZm9yIHRoZSBnb2xkZW4gdGVzdA=="
TEXT = "I'll check both cities — Paris and Rome."
TOOL_INPUTS = [{"city": "Paris", "unit": "celsius"}, {"city": "Rome", "unit": "celsius"}]
USAGE = {  # input_tokens 1564 include the 1024 cached; canonical input is the rest
    "input_tokens": 540,
    "output_tokens": 187,
    "cached_input_tokens": 1024,
    "cache_creation_input_tokens": 0,
    "reasoning_tokens": 64,
}


def request(messages: list[Message], stream: bool) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODEL,
        session_id="golden",
        system_prompt="You are a weather assistant.",
        messages=messages,
        tools=[WEATHER],
        max_output_tokens=1024,
        thinking=ThinkingConfig(budget_tokens=1024),
        stream=stream,
    )


FIRST = [Message.user("What's the weather in Paris and in Rome, in Celsius?")]


def adapter(cassette: str) -> tuple[Adapter, ReplayTransport]:
    replay = ReplayTransport(CASSETTES / cassette)
    config = AdapterConfig(api_key="sk-test-key", http_client=httpx.AsyncClient(transport=replay))
    return build_adapter("openai_responses", config, tool_id_store=InMemoryToolIdStore()), replay


async def streamed() -> tuple[list[StreamEvent], Adapter, ReplayTransport]:
    a, replay = adapter("tool_call_stream.yaml")
    events = [e async for e in a.stream(request(FIRST, stream=True))]
    return events, a, replay


def last(events: list[StreamEvent]) -> MessageComplete:
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


@pytest.mark.anyio
async def test_round_trip_canonical_to_wire_to_canonical() -> None:
    """the wire request equals the cassette's (the replay checks it) and the
    reply comes back as the canonical content written out above."""
    events, _, replay = await streamed()
    final = last(events)
    assert [type(b) for b in final.final_content] == [
        ThinkingBlock,
        TextBlock,
        ToolUseBlock,
        ToolUseBlock,
    ]
    thinking, text, *calls = final.final_content
    assert isinstance(thinking, ThinkingBlock) and isinstance(text, TextBlock)
    assert thinking.thinking == THINKING
    assert thinking.signature == ENCRYPTED  # output_item.done's, not .added's
    assert text.text == TEXT
    assert [(c.name, c.input) for c in calls if isinstance(c, ToolUseBlock)] == [
        ("get_weather", expected) for expected in TOOL_INPUTS
    ]
    assert all(c.id.startswith("tu_") for c in calls if isinstance(c, ToolUseBlock))
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.TOOL_USE, "completed")
    assert final.message_id == "resp_GoldenWeather1"
    assert replay.remaining == 1  # the continued turn is next


@pytest.mark.anyio
async def test_the_event_sequence_keeps_the_invariants() -> None:
    """Streamed or not, the same behaviour (docs/contract.md §2)."""
    events, _, _ = await streamed()
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
async def test_partial_json_is_the_raw_provider_fragment() -> None:
    """the fragments are the provider's, byte for byte."""
    events, _, _ = await streamed()
    fragments: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, ToolUseInputDelta):
            fragments.setdefault(event.tool_use_id, []).append(event.partial_json)
    assert list(fragments.values()) == raw_fragments()


def raw_fragments() -> list[list[str]]:
    """The argument fragments, read straight from the cassette's first body."""
    cassette = Cassette.load(CASSETTES / "tool_call_stream.yaml")
    body = b"".join(cassette.interactions[0].response.body_chunks()).decode()
    out: dict[int, list[str]] = {}
    for line in body.splitlines():
        if line.startswith("data: "):
            obj = json.loads(line[6:])
            if obj["type"] == "response.function_call_arguments.delta":
                out.setdefault(obj["output_index"], []).append(obj["delta"])
    return list(out.values())


@pytest.mark.anyio
async def test_all_four_token_counts_are_mapped() -> None:
    """Streamed or not, the same behaviour (docs/contract.md §2)."""
    events, _, _ = await streamed()
    assert last(events).usage.model_dump(exclude={"estimated"}) == USAGE


@pytest.mark.anyio
async def test_streamed_and_complete_calls_agree_on_content_and_usage() -> None:
    """Streamed or not, the same behaviour (docs/contract.md §2)."""
    events, _, _ = await streamed()
    final = last(events)
    a, replay = adapter("tool_call.yaml")
    response = await a.complete(request(FIRST, stream=False))
    assert replay.remaining == 0
    assert response.usage == final.usage
    assert response.stop_reason == final.stop_reason
    assert _without_ids(response.content) == _without_ids(final.final_content)
    assert response.message_id == final.message_id


def _without_ids(content: list[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(exclude={"id"}) for block in content]


@pytest.mark.anyio
async def test_the_next_turn_continues_with_only_the_tool_results() -> None:
    """The cassette's second request is the golden continued body: previous_response_id and
    the two function_call_output items, under the call ids OpenAI issued."""
    events, a, replay = await streamed()
    content = last(events).final_content
    calls = [b for b in content if isinstance(b, ToolUseBlock)]
    results = [
        ToolResultBlock(tool_use_id=calls[0].id, content="Paris: 21C, sunny"),
        ToolResultBlock(tool_use_id=calls[1].id, content="Rome: 27C, clear"),
    ]
    history = [*FIRST, Message(role=Role.ASSISTANT, content=content), Message.tool(*results)]
    answer = [e async for e in a.stream(request(history, stream=True))]
    assert replay.remaining == 0
    final = last(answer)
    assert final.final_content[0] == TextBlock(
        text="Paris: 21 °C and sunny; Rome: 27 °C and clear.",
        provider_raw=final.final_content[0].provider_raw,
    )
    assert (final.stop_reason.kind, final.message_id) == (StopKind.END_TURN, "resp_GoldenWeather2")
    assert final.usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 267,
        "output_tokens": 19,
        "cached_input_tokens": 1536,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 0,
    }


SHAPES: list[dict[str, Any]] = [
    {},
    {"s": 'text with "quotes", a newline\n and ünïcödé ✓', "i": 42, "f": -3.25, "t": True},
    {"f": False, "n": None, "big": 12345678901234567890, "small": 1e-9},
    {"nested": {"deep": {"deeper": [1, [2, [3]], {"k": "v"}]}}, "empty": {"a": [], "b": {}}},
    {"list": [{"x": 1}, {"x": 2, "y": [True, None, "z"]}], "mixed": [1, "two", 3.0, None]},
]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"shape{i}" for i in range(len(SHAPES))])
def test_tool_call_inputs_of_every_shape_survive_the_wire_both_ways(shape: dict[str, Any]) -> None:
    """canonical ToolUseBlock -> function_call item -> canonical is identity."""
    codec = get_codec("openai_responses")
    block = ToolUseBlock(id="call_1", name="probe", input=shape)
    history = CanonicalRequest(
        model="m",
        messages=[Message.user("go"), Message.assistant(block)],
        max_output_tokens=10,
    )
    sent = codec.encode(history, make_call(provider="openai_responses"))["input"][-1]
    assert sent["type"] == "function_call" and isinstance(sent["arguments"], str)
    reply = {"id": "resp_1", "model": "m", "status": "completed", "output": [sent],
             "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    final = codec.parse_body(
        json.loads(json.dumps(reply)), MessageBuilder("openai_responses", "m")
    )[-1]
    assert isinstance(final, MessageComplete)
    (parsed,) = final.final_content
    assert isinstance(parsed, ToolUseBlock)
    assert parsed.input == shape
    assert parsed.id == "call_1" and parsed.name == "probe"
