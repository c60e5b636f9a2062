"""Claude through Bedrock's InvokeModel: the Messages body Bedrock expects, and Anthropic's
events unwrapped from the event stream's ``chunk`` frames, end to end through the stack."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import OverloadedError, ProtocolError
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.wire.anthropic.bedrock import codec
from metis.wire.builder import MessageBuilder
from metis.wire.framing.aws_eventstream import event_frame, exception_frame
from tests.helpers import make_call

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "claude",
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Par'},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": 'is"}'},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {
        "type": "message_stop",
        "amazon-bedrock-invocationMetrics": {"inputTokenCount": 12, "outputTokenCount": 9},
    },
]


def chunk(event: dict[str, Any]) -> dict[str, Any]:
    return {"bytes": base64.b64encode(json.dumps(event).encode()).decode()}


def test_the_body_is_messages_with_bedrocks_version_and_no_model_or_stream() -> None:
    request = CanonicalRequest(
        model=f"bedrock_anthropic:{MODEL}",
        messages=[Message.user("hi")],
        max_output_tokens=50,
        stream=True,
    )
    body = codec.encode(request, make_call(provider="bedrock_anthropic", model=request.model))
    assert body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in body and "stream" not in body
    assert body["max_tokens"] == 50 and body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


def test_chunk_events_unwrap_into_anthropic_events() -> None:
    parser = codec.stream_parser(MessageBuilder("bedrock_anthropic", "m"))
    events = [e for event in EVENTS for e in parser.feed({"chunk": chunk(event)})]
    events += parser.end()
    done = events[-1]
    assert isinstance(done, MessageComplete)
    assert done.final_content[0].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert done.stop_reason.kind is StopKind.TOOL_USE
    assert (done.usage.input_tokens, done.usage.output_tokens) == (12, 9)


@pytest.mark.parametrize(
    "bad", [{"bytes": "not base64!"}, {"bytes": base64.b64encode(b"[1]").decode()}, {}]
)
def test_a_chunk_that_is_not_base64_json_is_a_protocol_error(bad: dict[str, Any]) -> None:
    parser = codec.stream_parser(MessageBuilder("bedrock_anthropic", "m"))
    with pytest.raises(ProtocolError, match="chunk"):
        parser.feed({"chunk": bad})


def adapter(body: bytes, sent: list[httpx.Request]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, content=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = AdapterConfig(
        api_key="ABSKkey", settings={"region": "us-east-2"}, http_client=client, max_retries=0
    )
    return build_adapter("bedrock_anthropic", config, tool_id_store=InMemoryToolIdStore())


def request() -> CanonicalRequest:
    return CanonicalRequest(
        model=f"bedrock_anthropic:{MODEL}",
        messages=[Message.user("weather?")],
        max_output_tokens=100,
        tools=[ToolDefinition(name="get_weather")],
    )


@pytest.mark.anyio
async def test_the_stack_streams_from_invoke_with_response_stream() -> None:
    sent: list[httpx.Request] = []
    frames = b"".join(event_frame("chunk", chunk(e)) for e in EVENTS)
    events = [e async for e in adapter(frames, sent).stream(request())]
    done = events[-1]
    assert isinstance(done, MessageComplete)
    (call,) = done.final_content
    assert call.id.startswith("tu_") and call.input == {"city": "Paris"}  # type: ignore[union-attr]
    (wire,) = sent
    assert str(wire.url) == (
        "https://bedrock-runtime.us-east-2.amazonaws.com/model/"
        "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
    )
    assert json.loads(wire.content)["anthropic_version"] == "bedrock-2023-05-31"


@pytest.mark.anyio
async def test_an_exception_frame_mid_stream_ends_the_message_and_raises_classified() -> None:
    sent: list[httpx.Request] = []
    frames = b"".join(event_frame("chunk", chunk(e)) for e in EVENTS[:3])
    frames += exception_frame(
        "serviceUnavailableException", "Bedrock is unable to process your request."
    )
    events: list[Any] = []
    with pytest.raises(OverloadedError):
        async for event in adapter(frames, sent).stream(request()):
            events.append(event)
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind is StopKind.ERROR


@pytest.mark.anyio
async def test_a_whole_reply_comes_from_invoke() -> None:
    sent: list[httpx.Request] = []
    body = {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    response = await adapter(json.dumps(body).encode(), sent).complete(request())
    assert response.content[0].text == "Sunny."  # type: ignore[union-attr]
    assert sent[0].url.raw_path.endswith(b"/invoke")


@pytest.mark.anyio
async def test_a_tool_loop_begun_without_thinking_is_sent_without_it_not_refused() -> None:
    """The loop in progress opened on another provider (no thinking block to send back): as
    on Anthropic's own API, this request goes without thinking (the thinking_turn stage)."""
    sent: list[httpx.Request] = []
    frames = b"".join(event_frame("chunk", chunk(e)) for e in EVENTS)
    call = ToolUseBlock(id="tu_01JB7R3V2F8Z2Q6J0Y8W3C5N4K", name="get_weather", input={})
    history = [
        Message.user("weather?"),
        Message.assistant(call),
        Message.tool(ToolResultBlock(tool_use_id=call.id, content="sunny")),
    ]
    thinking = request().model_copy(
        update={
            "messages": history,
            "thinking": ThinkingConfig(budget_tokens=1024),
            "max_output_tokens": 2048,
        }
    )
    events = [e async for e in adapter(frames, sent).stream(thinking)]
    done = events[-1]
    assert isinstance(done, MessageComplete)
    assert [w.block_type for w in done.warnings] == ["thinking"]
    assert "thinking" not in json.loads(sent[0].content)
