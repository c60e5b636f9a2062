"""Anthropic stream reading: a second message_start, content given in message_start, the
context-window stop, and the output count of a stream cut short. Sans-IO."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model.content import TextBlock, ToolUseBlock
from metis.model.events import MessageComplete, StreamEvent, TextDelta
from metis.model.response import StopKind, StopReason
from metis.wire.anthropic import codec
from metis.wire.builder import MessageBuilder
from metis.wire.codec import StreamParser


def start(msg_id: str = "msg_1", content: list[Any] | None = None, **usage: int) -> dict[str, Any]:
    message = {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    return {
        "type": "message_start",
        "message": {**message, "content": content or [], "usage": usage},
    }


def block_start(index: int, **block: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}


STOP = {"type": "message_stop"}


def feed(objs: list[dict[str, Any]]) -> tuple[StreamParser, list[StreamEvent]]:
    """The parser, and the events feeding it ``objs`` returned."""
    parser = codec.stream_parser(MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5"))
    return parser, [event for obj in objs for event in parser.feed(obj)]


def final(events: list[StreamEvent]) -> MessageComplete:
    event = events[-1]
    assert isinstance(event, MessageComplete)
    return event


def test_a_second_message_start_with_another_id_is_a_protocol_error() -> None:
    builder = MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5")
    parser = codec.stream_parser(builder)
    for obj in [start("msg_1"), block_start(0, type="text", text=""), text_delta(0, "Hi")]:
        parser.feed(obj)
    with pytest.raises(ProtocolError, match="msg_2"):
        parser.feed(start("msg_2"))
    assert builder.final_content() == [TextBlock(text="Hi")]  # what arrived is kept


def test_a_repeated_message_start_with_the_same_id_is_ignored() -> None:
    _, events = feed(
        [
            start("msg_1", input_tokens=10, output_tokens=1),
            block_start(0, type="text", text=""),
            text_delta(0, "Hello"),
            start("msg_1", input_tokens=999, output_tokens=1),
            text_delta(0, " there"),
            block_stop(0),
            message_delta("end_turn", output_tokens=3),
            STOP,
        ]
    )
    done = final(events)
    assert done.final_content == [TextBlock(text="Hello there")]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (10, 3)
    assert done.message_id == "msg_1" and not done.usage.estimated


def test_model_context_window_exceeded_is_max_tokens_with_the_raw_kept() -> None:
    _, events = feed([start(), message_delta("model_context_window_exceeded"), STOP])
    stop = final(events).stop_reason
    assert (stop.kind, stop.raw) == (StopKind.MAX_TOKENS, "model_context_window_exceeded")


def test_content_given_in_message_start_is_read() -> None:
    given = [
        {"type": "text", "text": "Already here. "},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
    ]
    _, events = feed(
        [
            start(content=given, input_tokens=5, output_tokens=1),
            block_start(2, type="text", text=""),
            text_delta(2, "Then more."),
            block_stop(2),
            message_delta("end_turn", output_tokens=9),
            STOP,
        ]
    )
    content = final(events).final_content
    assert content[0] == TextBlock(text="Already here. ")
    assert isinstance(content[1], ToolUseBlock) and content[1].input == {"q": "x"}
    assert content[2] == TextBlock(text="Then more.")
    assert next(e.text for e in events if isinstance(e, TextDelta)) == "Already here. "


@pytest.mark.parametrize("ending", [StopKind.CANCELLED, StopKind.ERROR])
def test_a_stream_cut_short_estimates_its_output_tokens(ending: StopKind) -> None:
    parser, events = feed(
        [
            start(input_tokens=12, output_tokens=1),
            block_start(0, type="text", text=""),
            text_delta(0, "x" * 400),  # 100 tokens at four characters a token
        ]
    )
    events += parser.interrupt(StopReason(kind=ending, raw=None))  # a cancel or an error
    usage = final(events).usage
    assert usage.estimated and usage.output_tokens == 100 and usage.input_tokens == 12


def test_a_stream_that_ends_properly_keeps_the_reported_count_exact() -> None:
    _, events = feed(
        [
            start(input_tokens=12, output_tokens=1),
            block_start(0, type="text", text=""),
            text_delta(0, "x" * 400),
            block_stop(0),
            message_delta("end_turn", output_tokens=87),
            STOP,
        ]
    )
    usage = final(events).usage
    assert not usage.estimated and usage.output_tokens == 87


# A compacted turn's usage, in the shape of Anthropic's compaction docs ("Understanding usage"):
# the top-level counts are the message pass only; ``iterations`` lists the compaction pass too.
COMPACTION_PASS = {
    "type": "compaction",
    "input_tokens": 180_000,
    "output_tokens": 3_500,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}
MESSAGE_PASS = {
    "type": "message",
    "input_tokens": 23_000,
    "output_tokens": 1_000,
    "cache_read_input_tokens": 4_000,
    "cache_creation_input_tokens": 600,
}
COMPACTED_USAGE = {
    "input_tokens": 23_000,
    "output_tokens": 1_000,
    "cache_read_input_tokens": 4_000,
    "cache_creation_input_tokens": 600,
    "iterations": [COMPACTION_PASS, MESSAGE_PASS],
}
BILLED = (203_000, 4_500, 4_000, 600)  # input, output, cache read, cache write


def counts(done: MessageComplete) -> tuple[int | None, ...]:
    usage = done.usage
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.cache_creation_input_tokens,
    )


def test_a_compacted_reply_counts_its_compaction_pass() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "compaction", "content": "Summary of the conversation."},
            {"type": "text", "text": "Go on."},
        ],
        "stop_reason": "end_turn",
        "usage": COMPACTED_USAGE,
    }
    events = codec.parse_body(body, MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5"))
    assert counts(final(list(events))) == BILLED


@pytest.mark.parametrize("passes_in", ["message_start", "message_delta"])
def test_a_compacted_stream_counts_its_compaction_pass(passes_in: str) -> None:
    """The passes may come with the stream's first usage or its last; either way the totals
    count them once."""
    opening = {k: v for k, v in COMPACTED_USAGE.items() if k != "iterations"}
    opening["output_tokens"] = 1
    closing = dict(COMPACTED_USAGE)
    if passes_in == "message_start":
        opening["iterations"] = [COMPACTION_PASS]
        del closing["iterations"]
    begin = start()
    begin["message"]["usage"] = opening
    end = message_delta("end_turn")
    end["usage"] = closing
    text = [block_start(0, type="text", text=""), text_delta(0, "Go on."), block_stop(0)]
    _, events = feed([begin, *text, end, STOP])
    assert counts(final(events)) == BILLED


def test_a_stream_whose_last_usage_has_only_output_keeps_the_compaction_input() -> None:
    begin = start()
    begin["message"]["usage"] = {**COMPACTED_USAGE, "output_tokens": 1}
    _, events = feed([begin, message_delta("end_turn", output_tokens=1_000), STOP])
    assert counts(final(events)) == BILLED


def test_malformed_iterations_are_a_protocol_error() -> None:
    begin = start()
    begin["message"]["usage"] = {"input_tokens": 5, "iterations": {"type": "compaction"}}
    with pytest.raises(ProtocolError, match=r"usage\.iterations"):
        feed([begin])


def test_the_stop_sequence_that_ended_the_reply_is_kept_streamed_and_whole() -> None:
    ended = {"stop_reason": "stop_sequence", "stop_sequence": "\n\nHuman:"}
    streamed = [start(), block_start(0, type="text", text="Hi"), block_stop(0)]
    _, events = feed([*streamed, {"type": "message_delta", "delta": ended, "usage": {}}, STOP])
    want = StopReason(kind=StopKind.STOP_SEQUENCE, raw="stop_sequence", sequence="\n\nHuman:")
    assert final(events).stop_reason == want
    body = {"id": "msg_1", "content": [{"type": "text", "text": "Hi"}], "usage": {}, **ended}
    builder = MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5")
    assert final(list(codec.parse_body(body, builder))).stop_reason == want
    ended_plainly = {**body, "stop_reason": "end_turn", "stop_sequence": None}
    builder = MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5")
    assert final(list(codec.parse_body(ended_plainly, builder))).stop_reason.sequence is None
    with pytest.raises(ProtocolError, match="stop_sequence"):
        feed([*streamed, {"type": "message_delta", "delta": {**ended, "stop_sequence": 7}}])


def test_a_whole_message_in_message_start_keeps_its_stop_reason_and_usage() -> None:
    """A tool call made from inside code execution (programmatic tool calling) comes back as a
    stream of two events: a message_start already holding the call, its stop reason and its
    usage, then message_stop; no message_delta follows."""
    call = {
        "type": "tool_use",
        "id": "toolu_7",
        "name": "flip_coin",
        "input": {"times": 2},
        "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_3"},
    }
    begin = start(content=[call], input_tokens=4, output_tokens=2)
    begin["message"]["stop_reason"] = "tool_use"
    _, events = feed([begin, STOP])
    done = final(events)
    assert done.stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="tool_use")
    assert not done.usage.estimated
    assert (done.usage.input_tokens, done.usage.output_tokens) == (4, 2)
    (block,) = done.final_content
    assert isinstance(block, ToolUseBlock) and block.input == {"times": 2}
