"""Streamed Chat Completions tool calls read by ``index`` in any order: fragments of one call
after another call started (interleaved indexes), calls whose ``id`` comes on their first
fragment only, and a reply that stops while a call still waits for the one before it. Each
stream passes the invariant checker and its calls are whole. Sans-IO."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.model.content import ToolUseBlock
from metis.model.events import StreamEvent, ToolUseInputDelta, ToolUseStart
from metis.model.response import StopKind, StopReason
from metis.wire.builder import OUTPUT_LIMIT_ARGUMENTS, MessageBuilder
from metis.wire.openai_chat import codec

from ..helpers import checked_final


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-7", "model": "m", "choices": [choice]}


def start(index: int, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    call = {"index": index, "id": call_id, "type": "function", "function": function}
    return chunk({"tool_calls": [call]})


def more(index: int, arguments: str) -> dict[str, Any]:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})


def stream(chunks: list[dict[str, Any]], marked_end: bool = False) -> list[StreamEvent]:
    parser = codec.stream_parser(MessageBuilder("openai", "openai:gpt-4o"))
    events = [event for obj in chunks for event in parser.feed(obj)]
    ended = parser.end_marked() if marked_end else parser.end()  # type: ignore[attr-defined]
    return [*events, *ended]


WEATHER = ToolUseBlock(id="call_a", name="weather", input={"city": "Oslo", "days": 3})
CLOCK = ToolUseBlock(id="call_b", name="clock", input={"zone": "CET"})


def test_fragments_of_a_call_after_the_next_call_started_are_kept() -> None:
    events = stream(
        [
            start(0, "call_a", "weather", '{"city": '),
            start(1, "call_b", "clock", '{"zone"'),
            more(0, '"Oslo", "da'),
            more(1, ': "CET"}'),
            more(0, 'ys": 3}'),
            chunk({}, "tool_calls"),
        ]
    )
    done = checked_final(events)
    assert done.final_content == [WEATHER, CLOCK]
    assert done.stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="tool_calls")
    deltas = [(e.tool_use_id, e.partial_json) for e in events if isinstance(e, ToolUseInputDelta)]
    assert deltas == [
        ("call_a", '{"city": '),
        ("call_a", '"Oslo", "da'),
        ("call_a", 'ys": 3}'),
        ("call_b", '{"zone"'),
        ("call_b", ': "CET"}'),
    ]


def test_a_waiting_call_streams_once_the_one_before_it_is_whole() -> None:
    events = stream(
        [
            start(0, "call_a", "weather"),
            start(1, "call_b", "clock"),
            more(0, '{"city": "Oslo", "days": 3}'),
            more(1, '{"zone": '),
            more(1, '"CET"}'),
            chunk({}, "tool_calls"),
        ]
    )
    assert checked_final(events).final_content == [WEATHER, CLOCK]
    # call_b is told as soon as call_a's arguments are whole, before its own last fragment
    kinds = [(type(e).__name__, getattr(e, "tool_use_id", None)) for e in events]
    assert kinds.index(("ToolUseStart", "call_b")) < kinds.index(("ToolUseInputDelta", "call_b"))
    assert [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)][-1] == '"CET"}'


def test_calls_in_any_index_order_with_ids_on_their_first_fragment_only() -> None:
    third = ToolUseBlock(id="call_c", name="note", input={"text": 'a } in a string " ok'})
    events = stream(
        [
            chunk({"role": "assistant", "content": None}),
            start(2, "call_c", "note"),
            start(0, "call_a", "weather"),
            more(0, '{"city": "Oslo", '),
            start(1, "call_b", "clock"),
            more(2, '{"text": "a } in a st'),
            more(1, '{"zone": "CET"}'),
            more(2, 'ring \\" ok"}'),
            more(0, '"days": 3}'),
            chunk({}, "tool_calls"),
        ]
    )
    done = checked_final(events)
    assert done.final_content == [third, WEATHER, CLOCK]
    assert [e.tool_use_id for e in events if isinstance(e, ToolUseStart)] == [
        "call_c",
        "call_a",
        "call_b",
    ]


def test_a_reply_ended_by_done_alone_keeps_its_waiting_calls() -> None:
    events = stream(
        [start(0, "call_a", "weather", "{"), start(1, "call_b", "clock", '{"zone": "CET"}')],
        marked_end=True,
    )
    done = checked_final(events)
    assert done.stop_reason.kind is StopKind.TOOL_USE
    assert [block.id for block in done.final_content] == ["call_a", "call_b"]
    assert done.final_content[1] == CLOCK


def test_a_stream_cut_while_a_call_waits_keeps_every_call() -> None:
    parser = codec.stream_parser(MessageBuilder("openai", "openai:gpt-4o"))
    events = [
        *parser.feed(start(0, "call_a", "weather", '{"city": "Os')),
        *parser.feed(start(1, "call_b", "clock", '{"zone": "CET"}')),
        *parser.interrupt(StopReason(kind=StopKind.ERROR)),
    ]
    done = checked_final(events)
    assert [block.id for block in done.final_content] == ["call_a", "call_b"]
    assert done.final_content[1] == CLOCK
    assert done.final_content[0].input_error is not None


def test_arguments_written_as_json_null_are_a_call_without_arguments() -> None:
    # Groq (llama-3.3-70b-versatile) answers a call of a tool without parameters with
    # "arguments": "null", whole and streamed; it is the call with no arguments, not a bad one.
    ping = ToolUseBlock(id="call_p", name="ping", input={})
    streamed = stream([start(0, "call_p", "ping", "nu"), more(0, "ll"), chunk({}, "tool_calls")])
    assert checked_final(streamed).final_content == [ping]
    call = {"id": "call_p", "type": "function", "function": {"name": "ping", "arguments": "null"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {"id": "chatcmpl-8", "model": "m", "choices": [{"index": 0, "message": message}]}
    body["choices"][0]["finish_reason"] = "tool_calls"
    whole = codec.parse_body(body, MessageBuilder("openai", "openai:gpt-4o"))
    done = checked_final(whole)
    assert done.final_content == [ping]
    assert done.final_content[0].input_error is None


def test_a_call_cut_by_the_output_limit_that_openrouter_calls_finished_stops_at_the_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # OpenRouter says finish_reason "tool_calls" for a reply the output limit cut inside its
    # call's arguments; its native_finish_reason says the limit ("length" or
    # "max_output_tokens"), whole and streamed.
    caplog.set_level(logging.WARNING, logger="metis")
    cut = '{"note": "half a sen'
    finish = chunk({}, "tool_calls")
    finish["choices"][0]["native_finish_reason"] = "max_output_tokens"
    streamed = checked_final(stream([start(0, "call_n", "note", cut), finish]))
    call = {"id": "call_n", "type": "function", "function": {"name": "note", "arguments": cut}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    choice["native_finish_reason"] = "length"
    body = {"id": "chatcmpl-9", "model": "m", "choices": [choice]}
    whole = checked_final(codec.parse_body(body, MessageBuilder("openai", "openai:gpt-4o")))
    for done, native in ((streamed, "max_output_tokens"), (whole, "length")):
        assert done.stop_reason == StopReason(kind=StopKind.MAX_TOKENS, raw=native)
        assert [block.input_error for block in done.final_content] == [OUTPUT_LIMIT_ARGUMENTS]
    assert not [r for r in caplog.records if "not a JSON object" in r.getMessage()]


def test_arguments_streamed_as_json_null_give_no_input_fragments() -> None:
    # The fragments are what a gateway's client gathers and parses: "null" is no input object.
    # Fragments that only began like null are given once they turn out otherwise.
    events = stream(
        [
            start(0, "call_p", "ping", " nu"),
            more(0, "ll"),
            start(1, "call_q", "note", "n"),
            more(1, "ote"),
            chunk({}, "tool_calls"),
        ]
    )
    deltas = [(e.tool_use_id, e.partial_json) for e in events if isinstance(e, ToolUseInputDelta)]
    assert deltas == [("call_q", "note")]
    ping = ToolUseBlock(id="call_p", name="ping", input={})
    assert checked_final(events).final_content[0] == ping
