"""Responses items that overlap: a call's input is whole at its own ``.done`` input event
(``response.function_call_arguments.done``, ``response.custom_tool_call_input.done``), even when
its ``response.output_item.done`` comes only after later items were added, as xAI's Responses
API sends server-side calls beside web searches. The call keeps its whole input, nothing is
reported dropped, and the stream's invariants hold."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.model.content import ToolUseBlock
from metis.model.events import MessageComplete
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses import OpenAIResponsesCodec

SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "weather"},
}


def _call(kind: str, index: int, status: str, text: str) -> dict[str, Any]:
    field = "input" if kind == "custom_tool_call" else "arguments"
    return {
        "id": f"item_{index}",
        "type": kind,
        "status": status,
        "call_id": f"call_{index}",
        "name": f"tool_{index}",
        field: text,
    }


def _stream(kind: str, pieces: bool) -> list[dict[str, Any]]:
    """A call whose input arrives (in pieces, or only whole in its ``.done`` event) and is
    done, a web search added and done, then the call's own ``output_item.done``, then the
    response."""
    text = '{"city":"Paris"}'
    delta, done = (
        ("response.custom_tool_call_input.delta", "response.custom_tool_call_input.done")
        if kind == "custom_tool_call"
        else ("response.function_call_arguments.delta", "response.function_call_arguments.done")
    )
    where = {"item_id": "item_0", "output_index": 0}
    field = "input" if kind == "custom_tool_call" else "arguments"
    finished = _call(kind, 0, "completed", text)
    response = {
        "id": "resp_1",
        "model": "grok",
        "status": "completed",
        "output": [finished, SEARCH],
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    return [
        {
            "type": "response.created",
            "response": {**response, "status": "in_progress", "output": []},
        },
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": _call(kind, 0, "in_progress", ""),
        },
        *(
            [
                {"type": delta, **where, "delta": text[:6]},
                {"type": delta, **where, "delta": text[6:]},
            ]
            if pieces
            else []
        ),
        {"type": done, **where, field: text},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**SEARCH, "status": "in_progress"},
        },
        {"type": "response.output_item.done", "output_index": 1, "item": SEARCH},
        {"type": "response.output_item.done", "output_index": 0, "item": finished},
        {"type": "response.completed", "response": response},
    ]


@pytest.mark.parametrize("pieces", [True, False], ids=["pieces", "whole"])
@pytest.mark.parametrize("kind", ["function_call", "custom_tool_call"])
def test_a_call_done_before_a_later_item_keeps_its_whole_input(
    kind: str, pieces: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    builder = MessageBuilder("openai_responses", "openai_responses:grok")
    parser = OpenAIResponsesCodec().stream_parser(builder)
    events = [event for obj in _stream(kind, pieces) for event in parser.feed(obj)] + list(
        parser.end()
    )
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    (call,) = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    want = {"input": '{"city":"Paris"}'} if kind == "custom_tool_call" else {"city": "Paris"}
    assert call.input == want and call.input_error is None
    assert call.name == "tool_0" and call.id == "call_0"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
