"""Gemini's ``streamGenerateContent`` without ``alt=sse`` answers with one JSON array of its
chunks (``[{...}\\r\\n,{...}]``, ``content-type: application/json``), as a stack whose
``stream_path`` leaves the parameter out gets it: the chunks are read as the stream they are
(text, a tool call, usage, the finish reason), whatever the cuts, never a stream said to end
before its finish reason; each chunk as soon as its closing brace has come, not when the array
is whole. Something else than an array of objects is a protocol error, after the objects
before it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message, ToolDefinition, ToolUseBlock
from metis.model.events import TextDelta
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import EndpointSpec, load_stack
from metis.wire.framing.objects import BodyObjects

from ..helpers import checked_final

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
    return [event async for event in _adapter_stream(_Chunks(body, size))]


async def _adapter_stream(chunks: _Chunks) -> AsyncIterator[Any]:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "alt=sse" not in str(request.url)
        headers = {"content-type": "application/json; charset=UTF-8"}
        return httpx.Response(200, headers=headers, stream=chunks)

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
        async for event in adapter.stream(request):
            yield event
    finally:
        await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 7, 97, len(ARRAY)])
async def test_a_json_array_stream_reads_as_its_chunks(size: int) -> None:
    events = await _stream(ARRAY, size)
    final = checked_final(events)
    assert final.final_content[0].text == "Let me look that up."
    (call,) = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert (call.name, call.input) == ("lookup", {"q": "tides"})
    assert final.stop_reason.kind is StopKind.TOOL_USE
    assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 9)
    assert not final.usage.estimated


@pytest.mark.parametrize(
    ("body", "before"),
    [
        (b"[1, 2]", []),
        (b'[{"a": 1}, "x"]', [{"a": 1}]),
        (b'[{"a": 1}', [{"a": 1}]),
        (b'[{"a": 1} 7]', [{"a": 1}]),
        (b'[{"a": 1}]]', [{"a": 1}]),
        (b"[" + b"[" * 200 + b"]" * 201, []),
        (b'[{"a": ' + b"[" * 200 + b"]" * 200 + b"}]", []),
    ],
)
def test_an_array_of_something_else_is_a_protocol_error_after_the_objects_before_it(
    body: bytes, before: list[Any]
) -> None:
    objects = BodyObjects("sse", streamed=True, content_type="application/json")
    assert objects.feed(body) == before
    with pytest.raises(ProtocolError, match=r"(?i)json array"):
        if objects.failed is not None:
            raise objects.failed
        objects.close()


def test_a_blank_first_chunk_decides_nothing() -> None:
    objects = BodyObjects("sse", streamed=True, content_type="application/json")
    assert objects.feed(b"  \r\n") == []
    assert objects.feed(b'[{"a": 1}]') == [{"a": 1}]
    assert objects.close() == []


TRICKY = [
    {"t": 'a "}" b \\', "u": "[{", "v": ["}", {"w": '\\"'}]},
    {"x": "\\"},
    {"y": "é ✓ \u2028", "z": [], "n": None},
    {},
]
TRICKY_ARRAY = "[" + "\r\n,".join(json.dumps(o, ensure_ascii=False) for o in TRICKY) + "]\n"


def _fed(body: bytes, cuts: list[int]) -> list[tuple[int, dict[str, Any]]]:
    """Each object, with how many bytes had been fed when it was given."""
    objects = BodyObjects("sse", streamed=True, content_type="application/json")
    got: list[tuple[int, dict[str, Any]]] = []
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        got += [(end, obj) for obj in objects.feed(body[start:end])]
        assert objects.failed is None
    assert objects.close() == []
    return got


@pytest.mark.parametrize("body", [ARRAY, TRICKY_ARRAY.encode()])
def test_each_object_is_given_when_its_closing_brace_arrives(body: bytes) -> None:
    every_byte = _fed(body, list(range(1, len(body))))
    whole = json.loads(body)
    assert [obj for _, obj in every_byte] == whole
    ends = [fed - 1 for fed, _ in every_byte]  # the byte each object came with
    assert [body[end : end + 1] for end in ends] == [b"}"] * len(whole)
    assert [json.loads(body[: end + 1].decode() + "]") for end in ends[:1]] == [whole[:1]]


@pytest.mark.parametrize("body", [ARRAY, TRICKY_ARRAY.encode()])
def test_any_two_pieces_give_what_the_whole_array_does(body: bytes) -> None:
    whole = json.loads(body)
    for cut in range(1, len(body)):
        assert [obj for _, obj in _fed(body, [cut])] == whole, cut


class _Counted(_Chunks):
    def __init__(self, body: bytes, size: int) -> None:
        super().__init__(body, size)
        self.sent = 0

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for piece in self.pieces:
            self.sent += 1
            yield piece


@pytest.mark.anyio
async def test_the_first_text_comes_before_the_array_has_ended() -> None:
    body = _Counted(ARRAY, 16)
    first_text_at: list[int] = []
    async for event in _adapter_stream(body):
        if isinstance(event, TextDelta) and not first_text_at:
            first_text_at.append(body.sent)
    assert first_text_at and first_text_at[0] < len(body.pieces) // 2
