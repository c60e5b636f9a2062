"""A Responses reply whose output items share an ``id`` (xAI's Responses API gives the reasoning
before a web search and the reasoning after it the same id) keeps every item: a whole body's
items are all new, so none is taken for one already read; a stream's items are still matched to
the final response by id, so none is read twice. Sans-IO."""

from __future__ import annotations

from typing import Any

from metis.model.content import ServerToolCallBlock, TextBlock, ThinkingBlock
from metis.model.events import MessageComplete, StreamEvent
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses import OpenAIResponsesCodec

codec = OpenAIResponsesCodec()


def reasoning(text: str, sealed: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": "rs_same",
        "status": "completed",
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": sealed,
    }


OUTPUT = [
    reasoning("Search first.", "sealed-1"),
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "ruby release"}},
    reasoning("Now answer.", "sealed-2"),
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "3.4.", "annotations": []}]},
]  # fmt: skip
BODY = {
    "id": "resp_1",
    "object": "response",
    "model": "grok-4",
    "status": "completed",
    "output": OUTPUT,
    "usage": {"input_tokens": 50, "output_tokens": 9},
}


def _final(events: list[StreamEvent] | Any) -> MessageComplete:
    final = list(events)[-1]
    assert isinstance(final, MessageComplete)
    return final


def _shape(final: MessageComplete) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for block in final.final_content:
        if isinstance(block, ThinkingBlock):
            out.append((block.thinking, block.signature))
        elif isinstance(block, TextBlock):
            out.append((block.text, None))
        elif isinstance(block, ServerToolCallBlock):
            out.append((block.name, None))
    return out


EXPECTED = [
    ("Search first.", "sealed-1"),
    ("web_search", None),
    ("Now answer.", "sealed-2"),
    ("3.4.", None),
]


def test_a_whole_body_keeps_every_item_whatever_their_ids() -> None:
    builder = MessageBuilder("openai_responses", "openai_responses:grok-4")
    assert _shape(_final(codec.parse_body(BODY, builder))) == EXPECTED


def test_a_streamed_reply_reads_each_item_once() -> None:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**BODY, "status": "in_progress", "output": []}}
    ]
    for index, item in enumerate(OUTPUT):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": BODY})
    parser = codec.stream_parser(MessageBuilder("openai_responses", "openai_responses:grok-4"))
    out = [event for obj in events for event in parser.feed(obj)]
    assert _shape(_final([*out, *parser.end()])) == EXPECTED
