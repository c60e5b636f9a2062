"""Freeform (custom) tool calls, read side (docs/contract.md §10): an OpenAI Chat
``tool_calls[]`` entry of ``type: "custom"`` (the SDK's ``ChatCompletionMessageCustomToolCall``;
streamed as ``{"index", "id", "type": "custom", "custom": {"name", "input"}}`` fragments, the
shape reported in openai/openai-openapi#576) and a Responses ``custom_tool_call`` item (the
SDK's ``ResponseCustomToolCall``, streamed with ``response.custom_tool_call_input.delta`` and
``.done``) are canonical tool calls whose input is ``{"input": "<the text>"}``, streamed and
whole; never a protocol error. The call goes back as a custom call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model.content import Message, ToolResultBlock, ToolUseBlock
from metis.model.events import MessageComplete, ToolUseEnd, ToolUseInputDelta
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import codec as chat
from metis.wire.openai_responses import OpenAIResponsesCodec

from ..helpers import make_call

DIFF = '*** Begin Patch\n*** Update File: a.py\n-x = "old"\n+x = "new"\n*** End Patch'
responses = OpenAIResponsesCodec()


def _checked(events: list[Any]) -> MessageComplete:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


def _read(codec: Any, provider: str, chunks: list[dict[str, Any]] | dict[str, Any]) -> Any:
    builder = MessageBuilder(provider, f"{provider}:gpt-5")
    if isinstance(chunks, dict):
        events = list(codec.parse_body(chunks, builder))
    else:
        parser = codec.stream_parser(builder)
        events = [event for chunk in chunks for event in parser.feed(chunk)]
        events += parser.end()
    return events, _checked(events)


def _the_call(final: MessageComplete) -> ToolUseBlock:
    (call,) = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    return call


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-5",
        "choices": [choice],
    }


CHAT_WHOLE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-5",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_7Hq",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": DIFF},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 30, "total_tokens": 50},
}
CHAT_STREAM = [
    _chat_chunk({"role": "assistant", "content": None}),
    _chat_chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_7Hq",
                    "type": "custom",
                    "custom": {"name": "apply_patch", "input": ""},
                }
            ]
        }
    ),
    *(
        _chat_chunk({"tool_calls": [{"index": 0, "custom": {"input": DIFF[i : i + 9]}}]})
        for i in range(0, len(DIFF), 9)
    ),
    _chat_chunk({}, "tool_calls"),
]


def _responses_item(**extra: Any) -> dict[str, Any]:
    item = {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_Pq2",
        "name": "apply_patch",
        "input": DIFF,
    }
    return {**item, **extra}


def _response(status: str = "completed", *items: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-5",
        "status": status,
        "output": list(items),
        "usage": {"input_tokens": 20, "output_tokens": 30, "total_tokens": 50},
    }


def _responses_stream(pieces: list[str], done: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": "ctc_1", "output_index": 0}
    return [
        {"type": "response.created", "response": _response("in_progress")},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": _responses_item(status="in_progress", input=""),
        },
        *(
            {"type": "response.custom_tool_call_input.delta", **where, "delta": piece}
            for piece in pieces
        ),
        {"type": "response.custom_tool_call_input.done", **where, "input": "".join(pieces)},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {
            "type": f"response.{'completed' if done['status'] == 'completed' else 'incomplete'}",
            "response": _response(
                "completed" if done["status"] == "completed" else "incomplete", done
            )
            | (
                {"incomplete_details": {"reason": "max_output_tokens"}}
                if done["status"] != "completed"
                else {}
            ),
        },
    ]


RESPONSES_STREAM = _responses_stream(
    [DIFF[i : i + 7] for i in range(0, len(DIFF), 7)], _responses_item()
)


@pytest.mark.parametrize(
    ("codec", "provider", "wire"),
    [
        (chat, "openai", CHAT_WHOLE),
        (chat, "openai", CHAT_STREAM),
        (responses, "openai_responses", _response("completed", _responses_item())),
        (responses, "openai_responses", RESPONSES_STREAM),
    ],
    ids=["chat-whole", "chat-streamed", "responses-whole", "responses-streamed"],
)
def test_a_custom_call_is_a_tool_call_with_its_raw_text(
    codec: Any, provider: str, wire: Any
) -> None:
    events, final = _read(codec, provider, wire)
    call = _the_call(final)
    assert call.name == "apply_patch"
    assert call.input == {"input": DIFF} and call.input_error is None
    assert final.stop_reason.kind is StopKind.TOOL_USE
    deltas = "".join(e.partial_json for e in events if isinstance(e, ToolUseInputDelta))
    assert json.loads(deltas) == {"input": DIFF}  # the deltas are the input's JSON
    (end,) = [e for e in events if isinstance(e, ToolUseEnd)]
    assert end.final_input == {"input": DIFF}


def test_a_chat_custom_call_goes_back_as_a_custom_call() -> None:
    _, final = _read(chat, "openai", CHAT_STREAM)
    call = _the_call(final)
    request = CanonicalRequest(
        model="openai:gpt-5",
        messages=[
            Message.user("Fix a.py."),
            Message(role="assistant", content=[call]),
            Message.tool(ToolResultBlock(tool_use_id=call.id, content="Done.")),
        ],
        max_output_tokens=64,
    )
    body = chat.encode(request, make_call("openai", "openai:gpt-5"))
    sent = body["messages"][1]["tool_calls"][0]
    assert sent == {
        "id": call.id,
        "type": "custom",
        "custom": {"name": "apply_patch", "input": DIFF},
    }


def test_a_responses_custom_call_goes_back_as_a_custom_call() -> None:
    _, final = _read(responses, "openai_responses", RESPONSES_STREAM)
    call = _the_call(final)
    request = CanonicalRequest(
        model="openai_responses:gpt-5",
        messages=[
            Message.user("Fix a.py."),
            Message(role="assistant", content=[call]),
            Message.tool(ToolResultBlock(tool_use_id=call.id, content="Done.")),
        ],
        max_output_tokens=64,
    )
    body = responses.encode(request, make_call("openai_responses", "openai_responses:gpt-5"))
    (item,) = [i for i in body["input"] if i.get("type") == "custom_tool_call"]
    assert item["input"] == DIFF and item["call_id"] == call.id and item["name"] == "apply_patch"
    assert [i["type"] for i in body["input"] if "output" in i] == ["custom_tool_call_output"]


def test_a_custom_call_input_that_is_not_text_is_a_protocol_error_naming_it() -> None:
    bad = json.loads(json.dumps(CHAT_WHOLE))
    bad["choices"][0]["message"]["tool_calls"][0]["custom"]["input"] = 7
    with pytest.raises(ProtocolError, match=r"custom\.input"):
        _read(chat, "openai", bad)
