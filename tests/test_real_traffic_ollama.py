"""Every recorded Ollama /api/chat exchange in ../shared/real-traffic/ollama, replayed through
the full adapter: no exception, invariants hold, and text, reasoning, tool calls, usage and the
raw stop reason match what the recording says. The recordings are raw HTTP (``.httprr``) plus
one bare JSON answer; expectations are read from them here, independently of the codec.
Skipped when the folder is absent (a fresh clone).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import CapabilityError, ErrorClass
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolDefinition,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.session import InMemoryToolIdStore
from metis.stages.invariants import StreamChecker

ROOT = Path(
    os.environ.get("METIS_REAL_TRAFFIC", Path(__file__).parents[2] / "shared" / "real-traffic")
)
FOLDER = ROOT / "ollama"
pytestmark = [
    pytest.mark.real_traffic,
    pytest.mark.skipif(not FOLDER.is_dir(), reason=f"no recorded Ollama traffic at {FOLDER}"),
]


# Reading the recordings --------------------------------------------------------------------


@dataclass
class HTTPMessage:
    start_line: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Exchange:
    source: str
    method: str
    path: str
    request: dict[str, Any]
    status: int
    content_type: str
    body: bytes  # as the client reads it: transfer encoding undone

    def __str__(self) -> str:
        return self.source


def parse_httprr(data: bytes) -> list[tuple[bytes, bytes]]:
    """``httprr trace v1``, then per exchange a line ``<request bytes> <response bytes>`` and
    the raw request and response, back to back."""
    header = b"httprr trace v1\n"
    if not data.startswith(header):
        raise ValueError("not an httprr trace")
    pos, out = len(header), []
    while pos < len(data):
        end = data.index(b"\n", pos)
        request_size, response_size = (int(n) for n in data[pos:end].split())
        pos = end + 1
        request = data[pos : pos + request_size]
        response = data[pos + request_size : pos + request_size + response_size]
        pos += request_size + response_size
        out.append((request, response))
    return out


def parse_http(raw: bytes) -> HTTPMessage:
    head, _, body = raw.partition(b"\r\n\r\n")
    start, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return HTTPMessage(start, headers, body)


def dechunk(body: bytes) -> bytes:
    out, pos = [], 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2  # the chunk's own CRLF


def exchanges() -> list[Exchange]:
    if not FOLDER.is_dir():
        return []
    found = []
    for path in sorted(FOLDER.glob("*.httprr")):
        for i, (raw_request, raw_response) in enumerate(parse_httprr(path.read_bytes())):
            request, response = parse_http(raw_request), parse_http(raw_response)
            method, target, _ = request.start_line.split(" ", 2)
            found.append(
                Exchange(
                    source=f"{path.name}#{i}",
                    method=method,
                    path=httpx.URL(target).path,
                    request=json.loads(request.body) if request.body else {},
                    status=int(response.start_line.split(" ", 2)[1]),
                    content_type=response.headers.get("content-type", ""),
                    body=response.body,
                )
            )
    for path in sorted(FOLDER.glob("*.json")):  # a bare, non-streamed /api/chat answer
        found.append(
            Exchange(
                source=path.name,
                method="POST",
                path="/api/chat",
                request={},
                status=200,
                content_type="application/json",
                body=path.read_bytes(),
            )
        )
    return found


EXCHANGES = exchanges()
CHAT = [e for e in EXCHANGES if e.path == "/api/chat"]


def param(exchange: Exchange) -> Any:
    if exchange.path == "/api/chat":
        return pytest.param(exchange, id=str(exchange))
    reason = f"{exchange.path} is not the chat endpoint this adapter speaks"
    return pytest.param(exchange, id=str(exchange), marks=pytest.mark.skip(reason=reason))


# Replaying ---------------------------------------------------------------------------------


def adapter_for(exchange: Exchange, chunk_size: int, **capabilities: Any) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        body = exchange.body
        chunks = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
        return httpx.Response(
            exchange.status,
            headers={"content-type": exchange.content_type},
            stream=_Stream(chunks),
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = AdapterConfig(http_client=client, capabilities=capabilities, max_retries=0)
    return build_adapter("ollama", config, tool_id_store=InMemoryToolIdStore())


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for chunk in self.chunks:
            yield chunk


def request_for(exchange: Exchange, stream: bool) -> CanonicalRequest:
    """The recorded request, canonically: its messages, tools and limits."""
    recorded = exchange.request
    options = recorded.get("options") or {}
    tools = [
        ToolDefinition(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            input_schema=t["function"].get("parameters") or {},
        )
        for t in recorded.get("tools") or []
    ]
    messages = [Message.user(m["content"]) for m in recorded.get("messages") or []]
    return CanonicalRequest(
        model=f"ollama:{recorded.get('model', 'recorded')}",
        messages=messages or [Message.user("replayed")],
        tools=tools,
        max_output_tokens=options.get("num_predict") or 1000,
        temperature=options.get("temperature"),
        session_id="replay",
        stream=stream,
    )


def streamed(exchange: Exchange) -> bool:
    return "ndjson" in exchange.content_type


async def replay(exchange: Exchange, chunk_size: int = 97) -> list[StreamEvent]:
    adapter = adapter_for(exchange, chunk_size, supports_tools=True, supports_thinking=True)
    if streamed(exchange):
        return [e async for e in adapter.stream(request_for(exchange, stream=True))]
    response = await adapter.complete(request_for(exchange, stream=False))
    return [MessageComplete(response.content, response.stop_reason, response.usage)]


# Expectations read straight from the recordings --------------------------------------------


def lines(exchange: Exchange) -> list[dict[str, Any]]:
    if not streamed(exchange):
        return [json.loads(exchange.body)]
    return [json.loads(line) for line in exchange.body.decode().splitlines() if line.strip()]


def expected(exchange: Exchange) -> tuple[list[tuple[str, Any]], dict[str, int], str | None]:
    thinking, text, calls = [], [], []
    last: dict[str, Any] = {}
    for obj in lines(exchange):
        message = obj.get("message") or {}
        thinking.append(message.get("thinking") or "")
        text.append(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            calls.append((call["function"]["name"], call["function"]["arguments"]))
        last = obj
    blocks: list[tuple[str, Any]] = []
    if "".join(thinking):
        blocks.append(("thinking", "".join(thinking)))
    if "".join(text):
        blocks.append(("text", "".join(text)))
    blocks += [("tool", call) for call in calls]
    usage = {
        "input_tokens": last.get("prompt_eval_count", 0),
        "output_tokens": last.get("eval_count", 0),
        "cached_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    return blocks, usage, last.get("done_reason")


def observed(final: MessageComplete) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for block in final.final_content:
        if isinstance(block, ThinkingBlock):
            out.append(("thinking", block.thinking))
        elif isinstance(block, TextBlock):
            out.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            out.append(("tool", (block.name, block.input)))
    return out


# Tests -------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", [param(e) for e in EXCHANGES if e.status == 200])
async def test_a_recorded_reply_reads_as_the_recording_says(exchange: Exchange) -> None:
    events = await replay(exchange)
    blocks, usage, done_reason = expected(exchange)
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert observed(final) == blocks
    assert final.usage.model_dump(exclude={"estimated"}) == usage
    assert not final.usage.estimated
    assert final.stop_reason.raw == done_reason
    has_calls = any(kind == "tool" for kind, _ in blocks)
    kinds = {"stop": StopKind.TOOL_USE if has_calls else StopKind.END_TURN}
    kinds["length"] = StopKind.MAX_TOKENS
    assert final.stop_reason.kind is kinds[done_reason]
    if streamed(exchange):
        checker = StreamChecker()
        for event in events:
            checker.check(event)
        checker.check_ended()


@pytest.mark.anyio
@pytest.mark.parametrize("chunk_size", [1, 4096])
async def test_chunk_boundaries_do_not_matter(chunk_size: int) -> None:
    exchange = next(e for e in CHAT if e.status == 200 and streamed(e) and "Stream" in e.source)
    whole = await replay(exchange, chunk_size=len(exchange.body))
    cut = await replay(exchange, chunk_size=chunk_size)
    a, b = whole[-1], cut[-1]
    assert isinstance(a, MessageComplete) and isinstance(b, MessageComplete)
    assert a.final_content == b.final_content and a.usage == b.usage


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", [param(e) for e in EXCHANGES if e.status != 200])
async def test_a_model_without_tools_is_a_capability_error(exchange: Exchange) -> None:
    """The one recorded error: gemma3:1b refuses a request with tools. The adapter declares
    tools (a user's mistaken declaration), so only the server can refuse."""
    message = json.loads(exchange.body)["error"]
    with pytest.raises(CapabilityError) as caught:
        await replay(exchange)
    assert caught.value.error_class is ErrorClass.CAPABILITY
    assert caught.value.provider_status == exchange.status
    assert caught.value.provider_message == message


def test_the_recordings_were_found() -> None:
    assert len(CHAT) >= 9
    assert {e.path for e in EXCHANGES} == {"/api/chat", "/api/generate", "/api/pull"}
    assert any(e.status == 400 for e in CHAT)
    assert any(not streamed(e) for e in CHAT)
