"""A scriptable HTTP peer for call-control tests: answers, failures, stalls and drops."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message, StreamEvent
from metis.pipeline.stores import InMemoryToolIdStore

STALL = object()  # in a chunk list: wait forever here
DROP = object()  # in a chunk list: the connection breaks here


@dataclass
class Reply:
    status: int = 200
    chunks: list[Any] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before each chunk


class ScriptedStream(httpx.AsyncByteStream):
    def __init__(self, reply: Reply, peer: FakePeer) -> None:
        self.reply = reply
        self.peer = peer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.reply.chunks:
            if self.reply.delay:
                await anyio.sleep(self.reply.delay)
            if chunk is STALL:
                self.peer.stalled.set()
                await anyio.sleep_forever()
            if chunk is DROP:
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            yield chunk if isinstance(chunk, bytes) else str(chunk).encode()

    async def aclose(self) -> None:
        self.peer.closed += 1


class FakePeer:
    """Serves scripted replies in order; counts requests and closed responses."""

    def __init__(self, *replies: Reply | BaseException) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.closed = 0
        self.stalled = anyio.Event()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request {len(self.requests)}")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        headers = {"content-type": "text/event-stream", **reply.headers}
        return httpx.Response(reply.status, headers=headers, stream=ScriptedStream(reply, self))

    def adapter(self, provider: str, **config: Any) -> Adapter:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        return build_adapter(
            provider,
            AdapterConfig(api_key="sk-test-0123456789abcdef", http_client=client, **config),
            tool_id_store=InMemoryToolIdStore(),
        )


def request(provider: str, stream: bool | None = None, **fields: Any) -> CanonicalRequest:
    fields.setdefault("messages", [Message.user("hi")])
    return CanonicalRequest(model=f"{provider}:m", max_output_tokens=100, stream=stream, **fields)


def sse(*objects: dict[str, Any], names: bool = True) -> list[str]:
    """Anthropic-style events (with event: names) or, names=False, OpenAI-style data lines."""
    out = []
    for obj in objects:
        head = f"event: {obj['type']}\n" if names else ""
        out.append(f"{head}data: {json.dumps(obj)}\n\n")
    return out


def anthropic_start(usage: int = 10) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "m",
            "usage": {"input_tokens": usage, "output_tokens": 1},
        },
    }


def anthropic_text(*pieces: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in pieces
        ),
        {"type": "content_block_stop", "index": 0},
    ]


def anthropic_end(stop: str = "end_turn") -> list[dict[str, Any]]:
    return [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]


def anthropic_reply(*pieces: str) -> Reply:
    return Reply(chunks=sse(anthropic_start(), *anthropic_text(*pieces), *anthropic_end()))


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return Reply(
        status=status, chunks=[body], headers={"content-type": "application/json", **headers}
    )


def openai_error(
    status: int, code: str | None, message: str, kind: str = "invalid_request_error", **headers: str
) -> Reply:
    body = json.dumps({"error": {"message": message, "type": kind, "code": code, "param": None}})
    return Reply(
        status=status, chunks=[body], headers={"content-type": "application/json", **headers}
    )


async def collect(adapter: Adapter, req: CanonicalRequest) -> list[StreamEvent]:
    return [event async for event in adapter.stream(req)]
