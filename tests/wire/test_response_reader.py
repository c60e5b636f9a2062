"""ResponseReader: framed objects in, canonical events out, with no event loop (sans-IO).

Recorded traffic is framed here by the sans-IO decoders and read through the reader alone,
then checked against what the recording says (tests/recorded_expectations.py); hand-made
objects drive each ending: complete, cut short, cancelled, failed, an HTTP error, and what
comes after the end (docs/contract.md §2, §4, §5).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from metis.errors import AdapterError, OverloadedError, ProtocolError, RateLimitError
from metis.model import (
    MessageComplete,
    MessageStart,
    StopKind,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolUseBlock,
    ToolUseEnd,
)
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import CUT_OFF_ARGUMENTS, INVALID_ARGUMENTS
from metis.wire.codec import Codec, get_codec
from metis.wire.framing.aws_eventstream import EventStreamDecoder, frame_object
from metis.wire.framing.sse_data import SSEDataDecoder
from metis.wire.response_reader import MAX_IGNORED_AFTER_END, ResponseReader
from tests import recorded_expectations as rec
from tests.helpers import collector_off_alone, metis_objects_in_cycles
from tests.recordings import ROOT, Exchange, exchanges

KEY = "sk-ant-api03-reader-test-secret-0123456789"


@dataclass
class Context:
    """The call, as the reader sees it."""

    provider: str = "anthropic"
    model: str = "anthropic:claude-sonnet-4-5"
    request_id: str = "req_1"
    session_id: str | None = None
    secrets: tuple[str, ...] = ()
    dropped: list[str] = field(default_factory=list)

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        self.dropped.append(block_type)


SENT = {"model": "m", "messages": [{"role": "user", "content": "x" * 339}]}
"""A request body of 400 characters: 100 tokens at four characters a token."""


def reader_for(codec: str = "anthropic", **context: Any) -> ResponseReader:
    return ResponseReader(get_codec(codec), Context(**context), request_body=SENT, secrets=(KEY,))


def valid(events: Sequence[StreamEvent]) -> list[StreamEvent]:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return list(events)


def final(events: Sequence[StreamEvent]) -> MessageComplete:
    last = events[-1]
    assert isinstance(last, MessageComplete)
    return last


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


# Anthropic's objects -------------------------------------------------------------------------


def start(**usage: int) -> dict[str, Any]:
    message = {"id": "msg_1", "model": "claude-sonnet-4-5", "usage": usage or {"input_tokens": 9}}
    return {"type": "message_start", "message": message}


def text_block(index: int, *texts: str) -> list[dict[str, Any]]:
    start_ = {"type": "content_block_start", "index": index, "content_block": {"type": "text"}}
    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}
        for t in texts
    ]
    return [start_, *deltas, {"type": "content_block_stop", "index": index}]


def tool_block(index: int, arguments: str, stop: bool = True) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": arguments}
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        {"type": "content_block_delta", "index": index, "delta": delta},
        *([{"type": "content_block_stop", "index": index}] if stop else []),
    ]


END = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
    {"type": "message_stop"},
]
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def read(reader: ResponseReader, objs: list[dict[str, Any]]) -> list[StreamEvent]:
    return [event for obj in objs for event in reader.feed(obj)]


# A whole reply -------------------------------------------------------------------------------


def test_a_stream_reads_to_its_events_each_given_once() -> None:
    reader = reader_for()
    first = reader.feed(start())
    assert first == [MessageStart("msg_1", "claude-sonnet-4-5")]
    events = [*first, *read(reader, [*text_block(0, "Hel", "lo"), *END])]
    assert reader.completed
    events += reader.finish()
    valid(events)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    done = final(events)
    assert done.final_content == [TextBlock(text="Hello")]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (9, 5)
    assert not done.usage.estimated
    assert reader.finish() == ()  # nothing is given twice


def test_a_whole_body_reads_to_the_same_events_as_its_stream() -> None:
    body = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "type": "message",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 5},
    }
    reader = reader_for()
    events = [*reader.body(body), *reader.finish()]
    streamed = reader_for()
    from_stream = [*read(streamed, [start(), *text_block(0, "Hello"), *END]), *streamed.finish()]
    assert valid(events) == from_stream


def test_a_stream_answered_with_a_whole_body_is_finished_by_it() -> None:
    reader = reader_for("openai_chat", provider="openai", model="openai:gpt-4o")
    body = {
        "id": "c1",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    events = [*reader.body(body), *reader.finish()]  # no finish_reason chunk was due
    assert final(valid(events)).final_content == [TextBlock(text="Hi")]


# Endings -------------------------------------------------------------------------------------


def test_a_stream_that_stops_short_is_a_protocol_error_and_ends_with_what_arrived() -> None:
    reader = reader_for()
    events = read(reader, [start(), *text_block(0, "partial")])
    with pytest.raises(ProtocolError, match="before message_stop") as caught:
        reader.finish()
    error = caught.value
    ending = reader.fail(error)
    assert ending is not None
    done = final(valid([*events, *ending]))
    assert done.stop_reason.kind is StopKind.ERROR
    assert done.final_content == [TextBlock(text="partial")]
    assert (error.provider, error.request_id) == ("anthropic", "req_1")


def test_a_provider_error_event_ends_the_message_with_stop_reason_error() -> None:
    reader = reader_for()
    events = read(reader, [start(), *text_block(0, "so far")])
    with pytest.raises(OverloadedError) as caught:
        reader.feed(OVERLOADED)
    ending = reader.fail(caught.value)
    assert ending is not None
    done = final(valid([*events, *ending]))
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.ERROR, "overloaded_error")
    assert done.final_content == [TextBlock(text="so far")]


def test_an_error_before_anything_arrived_ends_nothing() -> None:
    reader = reader_for()
    error = ProtocolError("the connection broke")
    assert reader.fail(error) == []  # no message began: the caller just raises
    assert error.provider == "anthropic"


def test_the_events_of_an_object_whose_reading_failed_are_not_lost() -> None:
    reader = reader_for("openai_chat", provider="openai", model="openai:gpt-4o")
    head = {"id": "c1", "model": "gpt-4o", "choices": [{"index": 0, "delta": {"content": "A"}}]}
    events = list(reader.feed(head))
    broken = {"choices": [{"index": 0, "delta": {"content": "B", "tool_calls": "not a list"}}]}
    with pytest.raises(ProtocolError) as caught:
        reader.feed(broken)  # "B" was read before the tool calls failed
    ending = reader.fail(caught.value)
    assert ending is not None
    events += ending
    assert [e.text for e in valid(events) if isinstance(e, TextDelta)] == ["A", "B"]
    assert final(events).final_content == [TextBlock(text="AB")]


def test_the_objects_of_a_read_give_what_each_gives_and_keep_them_when_one_fails() -> None:
    objects: list[dict[str, Any]] = [start(), *text_block(0, "Hel", "lo"), *END]
    objects.append(text_block(1, "late")[1])  # after the end: ignored
    expected = read(reader_for(), objects)
    together, events = reader_for(), list[StreamEvent]()
    together.feed_into(objects, events)
    assert events == expected
    assert final(valid([*events, *together.finish()])).final_content == [TextBlock(text="Hello")]
    failing, made = reader_for(), list[StreamEvent]()
    with pytest.raises(OverloadedError):
        failing.feed_into([start(), *text_block(0, "Hi"), OVERLOADED, *END], made)
    assert [e.text for e in made if isinstance(e, TextDelta)] == ["Hi"]


def test_a_cancel_closes_the_open_tool_and_keeps_what_arrived() -> None:
    reader = reader_for()
    cut = tool_block(1, '{"q": "Paris", "li', stop=False)
    events = read(reader, [start(), *text_block(0, "Let me look."), *cut])
    events += reader.cancel()
    valid(events)
    (end,) = [e for e in events if isinstance(e, ToolUseEnd)]
    assert end.input_error == CUT_OFF_ARGUMENTS and end.final_input == {"q": "Paris"}
    done = final(events)
    assert done.stop_reason.kind is StopKind.CANCELLED
    assert done.final_content[0] == TextBlock(text="Let me look.")


def test_a_cancel_before_anything_arrived_still_ends_the_message() -> None:
    events = reader_for().cancel()
    assert [e.type for e in valid(events)] == ["message.start", "message.complete"]
    assert final(events).stop_reason.kind is StopKind.CANCELLED


def test_an_http_error_answer_is_classified_with_the_key_hidden() -> None:
    body = json.dumps(
        {"type": "error", "error": {"type": "rate_limit_error", "message": f"slow, {KEY}"}}
    ).encode()
    error = reader_for().http_error(429, {"request-id": "req_9"}, body)
    assert isinstance(error, RateLimitError)
    assert (error.provider, error.provider_status, error.request_id) == ("anthropic", 429, "req_9")
    assert KEY not in str(error) and KEY not in (error.provider_message or "")


def test_a_secret_the_call_gains_while_it_is_read_is_hidden_too() -> None:
    context = Context()
    reader = ResponseReader(get_codec("anthropic"), context)
    context.secrets = ("token-fetched-late",)  # an auth stage added it after the reader began
    message = {"type": "authentication_error", "message": "bad token-fetched-late"}
    body = json.dumps({"type": "error", "error": message}).encode()
    error = reader.http_error(401, {}, body)
    assert "token-fetched-late" not in str(error)
    assert "token-fetched-late" not in (error.provider_message or "")


# After the end -------------------------------------------------------------------------------


def test_objects_after_the_end_make_no_events_one_warn_and_reading_stops_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = reader_for()
    events = read(reader, [start(), *text_block(0, "done"), *END])
    late = text_block(1, "late")[1]
    with caplog.at_level(logging.WARNING, logger="metis"):
        for _ in range(MAX_IGNORED_AFTER_END):
            assert reader.feed(late) == ()
            assert reader.reading
        assert reader.feed(late) == ()
        assert not reader.reading  # the caller stops reading here
    events += reader.finish()
    assert final(valid(events)).final_content == [TextBlock(text="done")]
    assert len(records(caplog, "metis.events_after_end")) == 1


def test_a_provider_error_event_after_the_end_is_still_raised() -> None:
    reader = reader_for()
    read(reader, [start(), *text_block(0, "done"), *END])
    with pytest.raises(OverloadedError) as caught:
        reader.feed(OVERLOADED)
    assert reader.fail(caught.value) == []  # the message had ended: only the error is left


def test_junk_after_the_end_is_ignored_with_one_warn(caplog: pytest.LogCaptureFixture) -> None:
    reader = reader_for()
    read(reader, [start(), *text_block(0, "done"), *END])
    with caplog.at_level(logging.WARNING, logger="metis"):
        assert reader.feed({"type": "content_block_delta", "index": "x"}) == ()  # unreadable
        assert reader.fail(ProtocolError(f"invalid JSON: {KEY}")) is None  # not raised
    fresh = reader_for()
    read(fresh, [start(), *text_block(0, "done"), *END])
    with caplog.at_level(logging.WARNING, logger="metis"):
        assert fresh.fail(ProtocolError(f"invalid JSON: {KEY}")) is None
    warned = records(caplog, "metis.events_after_end")
    assert len(warned) == 2  # one per reader
    assert "invalid JSON" in warned[1].getMessage() and KEY not in warned[1].getMessage()


# Usage and tool arguments, reported as data ---------------------------------------------------


def test_no_usage_from_the_provider_is_estimated_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = reader_for("openai_chat", provider="openai", model="openai:gpt-4o")
    chunks = [
        {"id": "c1", "model": "gpt-4o", "choices": [{"index": 0, "delta": {"content": "x" * 40}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    with caplog.at_level(logging.WARNING, logger="metis"):
        events = [*read(reader, chunks), *reader.finish()]
    usage = final(events).usage
    assert len(json.dumps(SENT)) == 400
    assert usage.estimated and (usage.input_tokens, usage.output_tokens) == (100, 10)
    (record,) = records(caplog, "metis.usage_estimated")
    assert record.__dict__["request_id"] == "req_1"


def test_tool_arguments_that_are_not_json_are_logged_once_with_the_key_hidden(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = reader_for()
    objs = [start(), *tool_block(0, f"my key is {KEY}"), *END]
    with caplog.at_level(logging.WARNING, logger="metis"):
        events = [*read(reader, objs), *reader.finish()]
    (tool,) = final(events).final_content
    assert isinstance(tool, ToolUseBlock) and tool.input_error == INVALID_ARGUMENTS
    (record,) = records(caplog, "metis.invalid_tool_arguments")
    assert "my key is" in record.getMessage() and KEY not in record.getMessage()
    assert record.__dict__["tool_use_id"] == "toolu_1"


def test_arguments_cut_off_by_a_cancel_are_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    reader = reader_for()
    read(reader, [start(), *tool_block(0, '{"q": ', stop=False)])
    with caplog.at_level(logging.WARNING, logger="metis"):
        reader.cancel()
    assert records(caplog, "metis.invalid_tool_arguments") == []


def test_usage_held_by_the_schema_parser_is_read_when_a_stream_is_cut_short() -> None:
    """Gemini repeats its usage in every chunk and only the last counts: the parser reads it
    when the message ends, also on a cancel."""
    reader = ResponseReader(gemini_codec(), Context("gemini", "gemini:g"), request_body={})
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3},
    }
    events = [*reader.feed(chunk), *reader.cancel()]
    usage = final(valid(events)).usage
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (12, 3, False)


def gemini_codec() -> Codec:
    (normalize,) = [s for s in load_stack("gemini").stages if s.name == "normalize"]
    return get_codec("schema", normalize.options["settings"])


# Recorded traffic, read with no event loop ---------------------------------------------------


EXPECTED = {
    "anthropic": (rec.expected_anthropic, rec.observed_anthropic),
    "openai": (rec.expected_openai, rec.observed_anthropic),
    "openai_responses": (rec.expected_responses, rec.observed_responses),
    "gemini": (rec.expected_gemini, rec.observed_gemini),
    "ollama": (rec.expected_ollama, rec.observed_ollama),
    "bedrock": (rec.expected_bedrock, rec.observed_bedrock),
}
STACKS = {"openai": "openai", "openai_responses": "openai_responses", "bedrock": "bedrock"}


def stack_parts(api: str) -> tuple[Codec, str]:
    """The codec the API's stack reads with, and its framing."""
    stages = {s.name: s.options for s in load_stack(STACKS.get(api, api)).stages}
    normalize = stages["normalize"]
    codec = get_codec(normalize["codec"], normalize.get("settings"))
    return codec, stages.get("decode", {}).get("format", "sse")


def framed(exchange: Exchange, fmt: str) -> Iterator[dict[str, Any]]:
    """The recorded body's objects, as the decode stage frames them."""
    if fmt == "eventstream":
        frames = EventStreamDecoder()
        yield from (frame_object(frame) for frame in frames.feed(exchange.body))
    elif fmt == "ndjson":
        yield from (json.loads(line) for line in exchange.body.splitlines() if line.strip())
    else:
        decoder = SSEDataDecoder()
        for data in [*decoder.feed(exchange.body), *decoder.close()]:
            if data.strip() == "[DONE]":
                return
            if data.strip():
                yield json.loads(data)


RECORDED = [
    pytest.param(e, id=str(e))
    for e in exchanges()
    if e.status == 200 and (e.api != "ollama" or e.uri == "/api/chat")
]


@pytest.mark.real_traffic
@pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}")
@pytest.mark.parametrize("exchange", RECORDED)
def test_a_recorded_reply_reads_as_recorded_with_no_event_loop(exchange: Exchange) -> None:
    codec, fmt = stack_parts(exchange.api)
    context = Context(exchange.api, f"{exchange.api}:recorded")
    reader = ResponseReader(codec, context, request_body=exchange.request)
    if exchange.streamed:
        events = [event for obj in framed(exchange, fmt) for event in reader.feed(obj)]
    else:
        events = list(reader.body(json.loads(exchange.body)))
    events += reader.finish()
    done = final(valid(events))
    expected, observed = EXPECTED[exchange.api]
    want = expected(exchange)
    assert observed(done) == want.blocks
    usage = done.usage.model_dump()
    assert {key: usage[key] for key in want.usage} == want.usage
    assert done.stop_reason.raw == want.stop_raw
    if want.dropped is not None:
        assert len(context.dropped) == want.dropped


@pytest.mark.real_traffic
@pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}")
@pytest.mark.parametrize(
    "exchange", [pytest.param(e, id=str(e)) for e in exchanges() if e.status != 200]
)
def test_a_recorded_error_answer_is_classified_with_no_event_loop(exchange: Exchange) -> None:
    errors = {
        "openai_responses": rec.error_responses,
        "gemini": rec.error_gemini,
        "ollama": rec.error_ollama,
        "bedrock": rec.error_bedrock,
    }
    want = errors.get(exchange.api, rec.error_recorded)(exchange)
    codec, _ = stack_parts(exchange.api)
    reader = ResponseReader(codec, Context(exchange.api, f"{exchange.api}:recorded"))
    error = reader.http_error(exchange.status, {}, exchange.body)
    assert isinstance(error, want.error_type) and isinstance(error, AdapterError)
    assert (error.error_class, error.provider_status) == (want.error_class, exchange.status)
    assert error.provider == exchange.api
    assert want.message_contains in error.message


def test_a_streams_reader_and_framing_are_freed_without_the_cyclic_collector() -> None:
    """A stream's framing (its body's objects) and reader (parser, builder, the usage
    estimate it may make) hold no reference cycle: freed as soon as the call drops them, not
    left for the cyclic collector, whose passes a gateway with many streams pays for."""

    from metis.wire.framing.objects import BodyObjects
    from metis.wire.openai_chat import codec
    from metis.wire.response_reader import ResponseReader

    class Context:
        provider, model, request_id, session_id, secrets = "openai", "gpt-4o", "req_1", None, ()

        def warn_dropped(self, *args: object, **kwargs: object) -> None:
            pass

    chunks = [
        b'data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
        b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    with collector_off_alone():
        objects = BodyObjects("sse", streamed=True, content_type="text/event-stream")
        reader = ResponseReader(codec, Context(), request_body={"messages": []})
        events = [e for chunk in chunks for obj in objects.feed(chunk) for e in reader.feed(obj)]
        events += reader.finish(objects.done)
        assert events and objects.done
        del objects, reader, events
        assert metis_objects_in_cycles() == []
