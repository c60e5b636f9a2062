"""Replies read right through whole stacks (adapter, transport on an httpx mock, decode,
normalize): what a unit test of one codec cannot show. No network; asyncio and trio."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ProtocolError
from metis.model.content import Message, ToolUseBlock
from metis.model.request import CanonicalRequest, ToolDefinition

pytestmark = pytest.mark.anyio

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def adapter(provider: str, handle: Callable[[httpx.Request], httpx.Response]) -> Any:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    config = AdapterConfig(api_key="test", http_client=client, max_retries=0)
    return build_adapter(provider, config)


def request(provider: str, stream: bool, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{provider}:m",
        session_id="reading",
        messages=[Message.user("Weather in Paris?")],
        max_output_tokens=256,
        stream=stream,
        **{"tools": [WEATHER], **fields},
    )


def chat_body(tool_calls: list[dict[str, Any]], finish: str = "tool_calls") -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }


async def test_invalid_tool_arguments_keep_the_call_marked_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{city: Paris}"},
    }

    def handle(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=chat_body([bad]))

    with caplog.at_level(logging.WARNING, logger="metis"):
        response = await adapter("openai", handle).complete(request("openai", stream=False))
    (call,) = response.content
    assert isinstance(call, ToolUseBlock) and call.name == "get_weather"
    assert call.input_error == "the arguments are not a JSON object"
    assert call.provider_raw is not None and call.provider_raw.data["arguments"] == "{city: Paris}"
    records = [
        r for r in caplog.records if getattr(r, "event", None) == "metis.invalid_tool_arguments"
    ]
    assert len(records) == 1 and "{city: Paris}" in records[0].getMessage()
    assert not [r for r in caplog.records if getattr(r, "event", None) == "metis.lossy_projection"]
    assert json.dumps(call.input) == "{}"


ANTHROPIC_BODY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Sunny, 21 C."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 12, "output_tokens": 7},
}
CHAT_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Sunny, 21 C."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
}
OLLAMA_BODY = {
    "model": "m",
    "created_at": "2026-11-23T10:00:00Z",
    "message": {"role": "assistant", "content": "Sunny, 21 C."},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 12,
    "eval_count": 7,
}


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("anthropic", ANTHROPIC_BODY),
        ("openai", CHAT_BODY),
        ("mistral", CHAT_BODY),
        ("ollama", OLLAMA_BODY),
    ],
)
async def test_a_streamed_request_answered_with_a_whole_json_body_is_a_complete_reply(
    provider: str, body: dict[str, Any]
) -> None:
    def handle(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)  # content-type: application/json

    tools = [] if provider == "ollama" else [WEATHER]  # without init, ollama declares no tools
    events = [
        e async for e in adapter(provider, handle).stream(request(provider, True, tools=tools))
    ]
    assert [e.type for e in events] == ["message.start", "text.delta", "message.complete"]
    done = events[-1]
    assert done.final_content[0].text == "Sunny, 21 C."
    assert done.stop_reason.kind.value == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (12, 7)


def tgi_native_call(city: str) -> dict[str, Any]:
    """TGI's own tool-call answer: id "0", arguments as an object, a description field."""
    function = {"description": None, "name": "get_weather", "arguments": {"city": city}}
    return chat_body([{"id": "0", "type": "function", "function": function}], "eos_token")


@pytest.mark.parametrize("offer_tools", [True, False])
async def test_tgi_native_tool_calls_get_canonical_ids(offer_tools: bool) -> None:
    replies = iter([tgi_native_call("Paris"), tgi_native_call("Rome")])

    def handle(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=next(replies))

    tgi = adapter("tgi", handle)
    fields: dict[str, Any] = {} if offer_tools else {"tools": []}
    ids = []
    for _ in range(2):
        response = await tgi.complete(request("tgi", stream=False, **fields))
        (call,) = [b for b in response.content if isinstance(b, ToolUseBlock)]
        assert call.name == "get_weather" and call.id.startswith("tu_")
        ids.append(call.id)
    assert ids[0] != ids[1]  # TGI says "0" both times


ANTHROPIC_CUT = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    b'"model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":25,"output_tokens":1}}}\n\n'
    b"event: content_block_start\n"
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'
    + b"x" * 400
    + b'"}}\n\n'
)


async def test_an_anthropic_stream_cut_short_reports_estimated_output_tokens() -> None:
    def handle(_: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream; charset=utf-8"}
        return httpx.Response(200, content=ANTHROPIC_CUT, headers=headers)

    events = []
    with pytest.raises(ProtocolError):
        async for event in adapter("anthropic", handle).stream(request("anthropic", True)):
            events.append(event)
    done = events[-1]
    assert done.type == "message.complete" and done.stop_reason.kind.value == "error"
    assert done.usage.estimated and done.usage.output_tokens == 100
    assert done.usage.input_tokens == 25
