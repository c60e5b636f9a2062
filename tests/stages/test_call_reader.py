"""The engine's reading of one call (metis/stages/codec/reading.py): the sans-IO ResponseReader
driven for a call, its failures said as the reader's endings, the call's secrets hidden.

The reader's own behaviour is tests/wire/test_response_reader.py; this file is what the send path
adds: which objects go to ``feed`` and which to ``body``, and what each failure the send loop
catches becomes (docs/contract.md §2 and §4).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from metis.errors import CancelledError, OverloadedError, ProtocolError, RateLimitError
from metis.model import MessageComplete, MessageStart, StopKind, StreamEvent, TextDelta
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.stages.codec.reading import CallReader
from metis.wire.codec import get_codec
from metis.wire.framing.objects import WholeBody

TOKEN = "fetched-for-this-call-7f3a9c21e5b04d6e"  # shaped like no known key

START = {
    "type": "message_start",
    "message": {"id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 3}},
}
TEXT_START = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
HI = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}
END = [
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]
WHOLE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


def call() -> Call:
    return Call("req_1", "anthropic", "anthropic:claude-x", "claude-x")


def reader_for(the_call: Call, *, stream: bool = True) -> CallReader:
    request = WireRequest("https://api.example/v1/messages", {"model": "claude-x"}, stream=stream)
    return CallReader(get_codec("anthropic"), request, the_call, ("sk-adapter-key-0123456789",))


def kinds(events: Any) -> list[str]:
    return [event.type for event in events]


def read_all(reader: CallReader, objects: list[dict[str, Any]]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for obj in objects:
        events += reader.read(obj)
    return events + list(reader.finish())


def test_a_stream_is_fed_object_by_object() -> None:
    events = read_all(reader_for(call()), [START, TEXT_START, HI, *END])
    assert kinds(events) == ["message.start", "text.delta", "message.complete"]


def test_a_whole_reply_where_a_stream_was_asked_for_is_read_as_a_reply() -> None:
    events = read_all(reader_for(call()), [WholeBody(WHOLE)])
    assert isinstance(events[0], MessageStart) and isinstance(events[1], TextDelta)
    assert isinstance(events[-1], MessageComplete)


def test_the_answer_to_a_request_not_streamed_is_read_as_a_reply() -> None:
    events = read_all(reader_for(call(), stream=False), [WHOLE])
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind is StopKind.END_TURN


def test_a_cancel_ends_the_message_with_what_arrived_and_raises_nothing() -> None:
    reader = reader_for(call())
    arrived = read_all_but_end(reader, [START, TEXT_START, HI])
    events, raised = reader.ended(CancelledError("the call was cancelled"))
    assert raised is None
    assert kinds(arrived) == ["message.start", "text.delta"]
    (complete,) = events
    assert isinstance(complete, MessageComplete)
    assert complete.stop_reason.kind is StopKind.CANCELLED
    assert complete.final_content[0].text == "hi"  # type: ignore[union-attr]


def read_all_but_end(reader: CallReader, objects: list[dict[str, Any]]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for obj in objects:
        events += reader.feed(obj)
    return events


def test_an_http_error_answer_is_the_codecs_error_with_the_call_secrets_hidden() -> None:
    the_call = call()
    reader = reader_for(the_call)
    the_call.add_secret(TOKEN)  # fetched by an auth step after the reader was made
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": f"slow {TOKEN}"}}
    events, raised = reader.ended(HTTPFailure(429, {}, json.dumps(body).encode()))
    assert events == ()
    assert isinstance(raised, RateLimitError)
    assert raised.__cause__ is None and raised.__suppress_context__
    assert (raised.provider, raised.request_id) == ("anthropic", "req_1")
    assert TOKEN not in str(raised) and TOKEN not in (raised.provider_message or "")


def test_a_failure_after_the_message_began_ends_it_with_stop_reason_error() -> None:
    the_call = call()
    reader = reader_for(the_call)
    read_all_but_end(reader, [START, TEXT_START, HI])
    the_call.add_secret(TOKEN)
    error = OverloadedError(f"overloaded, {TOKEN}")
    events, raised = reader.ended(error)
    assert raised is error and TOKEN not in str(error)
    (complete,) = events
    assert isinstance(complete, MessageComplete)
    assert complete.stop_reason.kind is StopKind.ERROR


def test_junk_after_the_end_is_ignored_and_not_raised() -> None:
    reader = reader_for(call())
    read_all(reader, [START, TEXT_START, HI, *END])
    assert reader.ended(ProtocolError("provider sent invalid JSON")) == ((), None)


def test_a_bug_is_raised_as_itself() -> None:
    reader = reader_for(call())
    read_all_but_end(reader, [START])
    bug = KeyError("content")
    assert reader.ended(bug) == ((), bug)


def test_tool_arguments_quoting_a_token_fetched_for_the_call_are_logged_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    the_call = call()
    reader = reader_for(the_call)
    the_call.add_secret(TOKEN)
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    fragment = {"type": "input_json_delta", "partial_json": f"my token is {TOKEN}"}
    caplog.set_level(logging.WARNING, logger="metis")
    events = read_all(
        reader,
        [
            START,
            {"type": "content_block_start", "index": 0, "content_block": tool},
            {"type": "content_block_delta", "index": 0, "delta": fragment},
            *END,
        ],
    )
    assert isinstance(events[-1], MessageComplete)
    (record,) = [
        r for r in caplog.records if getattr(r, "event", None) == "metis.invalid_tool_arguments"
    ]
    assert "my token is" in record.getMessage() and TOKEN not in record.getMessage()
