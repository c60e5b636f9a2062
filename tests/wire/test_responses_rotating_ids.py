"""A Responses stream whose item ids change between events of the same item (GitHub Copilot's
endpoint gives each event, and the final response, a fresh id) is read by ``output_index``: no
text, reasoning or tool call appears twice."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from metis.model.content import TextBlock, ThinkingBlock, ToolUseBlock
from metis.model.events import MessageComplete, TextDelta
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses import OpenAIResponsesCodec

codec = OpenAIResponsesCodec()
_ids = itertools.count(1)


def _fresh(prefix: str) -> str:
    """A new id for every event, as the endpoint sends them."""
    return f"{prefix}_{next(_ids):04d}"


def _reasoning(index: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    done = {
        "id": _fresh("rs"),
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Thinking it over."}],
        "encrypted_content": "enc",
    }
    where = {"output_index": index, "summary_index": 0}
    events = [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {"id": _fresh("rs"), "type": "reasoning", "summary": []},
        },
        {
            "type": "response.reasoning_summary_part.added",
            **where,
            "item_id": _fresh("rs"),
            "part": {"type": "summary_text", "text": ""},
        },
        *(
            {
                "type": "response.reasoning_summary_text.delta",
                **where,
                "item_id": _fresh("rs"),
                "delta": piece,
            }
            for piece in ("Thinking ", "it over.")
        ),
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]
    return events, {**done, "id": _fresh("rs")}


def _message(index: int, pieces: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    text = "".join(pieces)
    done = {
        "id": _fresh("msg"),
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    where = {"output_index": index, "content_index": 0}
    added = {"id": _fresh("msg"), "type": "message", "role": "assistant", "content": []}
    events = [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *(
            {
                "type": "response.output_text.delta",
                **where,
                "item_id": _fresh("msg"),
                "delta": piece,
            }
            for piece in pieces
        ),
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]
    return events, {**done, "id": _fresh("msg")}


def _call(index: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    item = {"type": "function_call", "call_id": "call_1", "name": "get_weather"}
    done = {**item, "id": _fresh("fc"), "arguments": '{"city":"Oslo"}', "status": "completed"}
    events = [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "id": _fresh("fc"), "arguments": ""},
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": index,
            "item_id": _fresh("fc"),
            "delta": '{"city":"Oslo"}',
        },
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]
    return events, {**done, "id": _fresh("fc")}


def _read(stream: list[dict[str, Any]]) -> tuple[list[Any], MessageComplete]:
    builder = MessageBuilder("openai_responses", "openai_responses:gpt-5")
    parser = codec.stream_parser(builder)
    events = [event for obj in stream for event in parser.feed(obj)]
    events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return events, final


@pytest.mark.parametrize("with_call", [False, True], ids=["text", "text-and-call"])
def test_items_whose_ids_change_between_events_are_read_once(with_call: bool) -> None:
    parts = [_reasoning(0), _message(1, ["It is ", "cold in Oslo."])]
    if with_call:
        parts.append(_call(2))
    response = {"id": "resp_1", "model": "gpt-5", "status": "completed"}
    stream = [{"type": "response.created", "response": {**response, "output": []}}]
    for events, _ in parts:
        stream.extend(events)
    output = [final_item for _, final_item in parts]
    stream.append({"type": "response.completed", "response": {**response, "output": output}})
    events, final = _read(stream)
    content = final.final_content
    kinds = [ThinkingBlock, TextBlock] + ([ToolUseBlock] if with_call else [])
    assert [type(b) for b in content] == kinds
    assert isinstance(content[0], ThinkingBlock) and content[0].thinking == "Thinking it over."
    assert isinstance(content[1], TextBlock) and content[1].text == "It is cold in Oslo."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is cold in Oslo."


def test_an_item_only_the_final_response_has_is_still_read() -> None:
    events, _ = _message(0, ["Hello."])
    late = {
        "id": _fresh("msg"),
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": " And more.", "annotations": []}],
    }
    _, first = _message(0, ["Hello."])
    response = {"id": "resp_1", "model": "gpt-5", "status": "completed"}
    stream = [
        {"type": "response.created", "response": {**response, "output": []}},
        *events,
        {"type": "response.completed", "response": {**response, "output": [first, late]}},
    ]
    _, final = _read(stream)
    assert [b.text for b in final.final_content if isinstance(b, TextBlock)] == [
        "Hello.",
        " And more.",
    ]
