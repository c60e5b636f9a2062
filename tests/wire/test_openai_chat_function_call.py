"""Deprecated function calling's reply: a Chat Completions message whose one call is a
``function_call`` (``name`` and ``arguments``, no id) with ``finish_reason: function_call``,
whole and streamed (``delta.function_call``: the name on the first fragment, the arguments in
pieces). The call is read as a tool call with an id of metis's own, not dropped. Sans-IO."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model.content import ToolUseBlock
from metis.model.response import StopKind, StopReason
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import codec

from ..helpers import checked_final

STOP = StopReason(kind=StopKind.TOOL_USE, raw="function_call")


def whole(message: dict[str, Any]) -> Any:
    body = {
        "id": "chatcmpl-legacy1",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": "function_call"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }
    return checked_final(codec.parse_body(body, MessageBuilder("openai", "openai:gpt-4o-mini")))


def test_a_whole_reply_with_a_function_call_reads_as_a_tool_call() -> None:
    call = {"name": "lookup_tide", "arguments": '{"harbour": "Bergen", "day": 2}'}
    done = whole({"role": "assistant", "content": None, "function_call": call})
    [block] = done.final_content
    assert isinstance(block, ToolUseBlock)
    assert (block.name, block.input) == ("lookup_tide", {"harbour": "Bergen", "day": 2})
    assert block.id.startswith("call_")
    assert done.stop_reason == STOP


def test_a_function_call_that_is_not_an_object_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="function_call"):
        whole({"role": "assistant", "content": None, "function_call": "lookup_tide"})


def test_a_function_call_with_every_field_empty_is_no_call() -> None:
    """Snowflake Cortex fills every field of its message, an unused ``function_call`` with
    ``name: ""`` and ``arguments: ""``."""
    unused = {"name": "", "arguments": ""}
    done = whole({"role": "assistant", "content": "Tide at noon.", "function_call": unused})
    assert [block.type for block in done.final_content] == ["text"]
    parser = codec.stream_parser(MessageBuilder("openai", "openai:gpt-4o-mini"))
    pieces = [chunk({"content": "Noon.", "function_call": unused}), chunk({}, "stop")]
    events = [event for obj in pieces for event in parser.feed(obj)]
    streamed = checked_final([*events, *parser.end()])
    assert [block.type for block in streamed.final_content] == ["text"]
    assert streamed.stop_reason.kind is StopKind.END_TURN


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-legacy2", "model": "gpt-4o-mini", "choices": [choice]}


def test_a_streamed_function_call_reads_as_one_tool_call() -> None:
    parser = codec.stream_parser(MessageBuilder("openai", "openai:gpt-4o-mini"))
    first = {"name": "lookup_tide", "arguments": ""}
    chunks = [
        chunk({"role": "assistant", "content": None, "function_call": first}),
        chunk({"function_call": {"arguments": '{"harbour"'}}),
        chunk({"function_call": {"arguments": ': "Bergen"}'}}),
        chunk({}, "function_call"),
    ]
    events = [event for obj in chunks for event in parser.feed(obj)]
    done = checked_final([*events, *parser.end()])
    [block] = done.final_content
    assert isinstance(block, ToolUseBlock)
    assert (block.name, block.input) == ("lookup_tide", {"harbour": "Bergen"})
    assert block.id.startswith("call_")
    assert done.stop_reason == STOP
