"""Gemini's ``streamGenerateContent`` without ``alt=sse`` answers with one JSON array of its
chunks (``[{...}\\r\\n,{...}]``, ``content-type: application/json``), as a stack whose
``stream_path`` leaves the parameter out gets it: the chunks are read as the stream they are
(text, a tool call, usage, the finish reason), whatever the cuts, never a stream said to end
before its finish reason. Something else than an array of objects is a protocol error."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message, MessageComplete, ToolDefinition, ToolUseBlock
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import EndpointSpec, load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.framing.objects import BodyObjects

pytestmark = pytest.mark.backend_independent

CHUNKS = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Let me look "}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "that up."}]}}]},
    {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "lookup", "args": {"q": "tides"}}}],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 9},
        "modelVersion": "gemini-2.5-flash",
    },
]
ARRAY = ("[" + "\r\n,".join(json.dumps(chunk) for chunk in CHUNKS) + "]").encode()


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, body: bytes, size: int) -> None:
        self.pieces = [body[i : i + size] for i in range(0, len(body), size)]

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for piece in self.pieces:
            yield piece


async def _stream(body: bytes, size: int) -> list[Any]:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "alt=sse" not in str(request.url)
        headers = {"content-type": "application/json; charset=UTF-8"}
        return httpx.Response(200, headers=headers, stream=_Chunks(body, size))

    stack = load_stack("gemini")
    endpoint = EndpointSpec(
        base_url="https://generativelanguage.googleapis.com",
        path="/v1beta/models/{model}:generateContent",
        stream_path="/v1beta/models/{model}:streamGenerateContent",
    )
    config = AdapterConfig(
        api_key="k",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        max_retries=0,
    )
    adapter = build_adapter(
        stack.model_copy(update={"endpoint": endpoint}), config, tool_id_store=InMemoryToolIdStore()
    )
    request = CanonicalRequest(
        model="gemini:gemini-2.5-flash",
        messages=[Message.user("Tides?")],
        max_output_tokens=100,
        stream=True,
        tools=[ToolDefinition(name="lookup")],
    )
    try:
        return [event async for event in adapter.stream(request)]
    finally:
        await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 7, 97, len(ARRAY)])
async def test_a_json_array_stream_reads_as_its_chunks(size: int) -> None:
    events = await _stream(ARRAY, size)
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert final.final_content[0].text == "Let me look that up."  # type: ignore[union-attr]
    (call,) = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert (call.name, call.input) == ("lookup", {"q": "tides"})
    assert final.stop_reason.kind is StopKind.TOOL_USE
    assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 9)
    assert not final.usage.estimated


@pytest.mark.parametrize(
    "body", [b"[1, 2]", b'[{"a": 1}, "x"]', b'[{"a": 1}', b"[" + b"[" * 200 + b"]" * 201]
)
def test_an_array_of_something_else_is_a_protocol_error(body: bytes) -> None:
    objects = BodyObjects("sse", streamed=True, content_type="application/json")
    assert objects.feed(body) == []
    with pytest.raises(ProtocolError, match="JSON array"):
        objects.close()


def test_a_blank_first_chunk_decides_nothing() -> None:
    objects = BodyObjects("sse", streamed=True, content_type="application/json")
    assert objects.feed(b"  \r\n") == []
    assert objects.feed(b'[{"a": 1}]') == []
    assert objects.close() == [{"a": 1}]
