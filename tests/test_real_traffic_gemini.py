"""Every recorded Gemini exchange in ../shared/real-traffic, replayed through the full gemini
adapter (routed by the recorded URI): no exception, invariants hold, and text, function calls,
thought signatures (on the part they rode on), usage and the raw finish reason match what the
recording says. Expectations are read from the recordings here, independently of the codec.
The Gemini calls inside an openai_chat recording are included; the Vertex AI one replays
through the same wire schema with only the endpoint changed. Skipped when the folder is absent.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from metis import AdapterConfig, AdapterError, ErrorClass, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    Role,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.pipeline.stack import EndpointSpec, load_stack
from metis.session import InMemoryToolIdStore
from metis.stages.invariants import StreamChecker

ROOT = Path(
    os.environ.get("METIS_REAL_TRAFFIC", Path(__file__).parents[2] / "shared" / "real-traffic")
)
pytestmark = [
    pytest.mark.real_traffic,
    pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}"),
]
_GEMINI_URI = re.compile(
    r"^https://(?P<host>generativelanguage|aiplatform)\.googleapis\.com(?P<prefix>/.*)/models/"
    r"(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent\?alt=sse)$"
)
_CANONICAL_PARTS = {"text", "functionCall"}


@dataclass
class Exchange:
    source: str
    uri: str
    model: str
    prefix: str
    status: int
    streamed: bool
    body: bytes
    request: dict[str, Any]
    chunks: list[dict[str, Any]] = field(default_factory=list)
    next_request: dict[str, Any] | None = None

    def __str__(self) -> str:
        return self.source


def exchanges() -> list[Exchange]:
    if not ROOT.is_dir():
        return []
    found = []
    for path in sorted(ROOT.glob("*/*.yaml")):
        interactions = yaml.safe_load(path.read_text()).get("interactions") or []
        for i, interaction in enumerate(interactions):
            uri = interaction["request"]["uri"]
            match = _GEMINI_URI.match(uri)
            if match is None:
                continue
            response = interaction["response"]
            if "string" in (response.get("body") or {}):
                body = response["body"]["string"].encode()
                chunks = [json.loads(data) for data in sse_data(body)]
            else:
                chunks = [response["parsed_body"]]
                body = json.dumps(chunks[0]).encode()
            following = interactions[i + 1]["request"] if i + 1 < len(interactions) else None
            found.append(
                Exchange(
                    source=f"{path.parent.name}/{path.name}#{i}",
                    uri=uri,
                    model=match["model"],
                    prefix=match["prefix"],
                    status=response["status"]["code"],
                    streamed=match["method"].startswith("stream"),
                    body=body,
                    request=interaction["request"].get("parsed_body") or {},
                    chunks=chunks,
                    next_request=(following or {}).get("parsed_body"),
                )
            )
    return found


def sse_data(body: bytes) -> list[str]:
    events = re.split(r"\r\n\r\n|\n\n|\r\r", body.decode())
    return [e[5:].strip() for e in events if e.startswith("data:") and e[5:].strip()]


EXCHANGES = exchanges()
SUCCESSES = [e for e in EXCHANGES if e.status == 200]
FAILURES = [e for e in EXCHANGES if e.status != 200]


def adapter_for(exchange: Exchange, chunk_size: int = 97) -> Adapter:
    """The gemini stack; for Vertex AI, the same stack with its endpoint (YAML only)."""
    stack = load_stack("gemini")
    if "aiplatform" in exchange.uri:
        endpoint = EndpointSpec(
            base_url="https://aiplatform.googleapis.com",
            path=f"{exchange.prefix}/models/{{model}}:generateContent",
            stream_path=f"{exchange.prefix}/models/{{model}}:streamGenerateContent?alt=sse",
        )
        stack = stack.model_copy(update={"endpoint": endpoint, "name": "gemini"})
    content_type = "text/event-stream" if exchange.streamed else "application/json"

    def handler(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == exchange.uri  # routed exactly as recorded
        assert request.headers["x-goog-api-key"] == "k"
        pieces = [
            exchange.body[i : i + chunk_size] for i in range(0, len(exchange.body), chunk_size)
        ]
        return httpx.Response(
            exchange.status, headers={"content-type": content_type}, stream=_Stream(pieces)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = AdapterConfig(api_key="k", http_client=client)
    return build_adapter(stack, config, tool_id_store=InMemoryToolIdStore())


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for chunk in self.chunks:
            yield chunk


def request_for(exchange: Exchange) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"gemini:{exchange.model}",
        messages=[Message.user("replayed")],
        max_output_tokens=1000,
        session_id="replay",
    )


async def replay(exchange: Exchange) -> list[StreamEvent]:
    adapter = adapter_for(exchange)
    request = request_for(exchange)
    if exchange.streamed:
        return [event async for event in adapter.stream(request)]
    response = await adapter.complete(request)
    return [
        MessageComplete(response.content, response.stop_reason, response.usage, response.message_id)
    ]


# Expectations read straight from the recordings ---------------------------------------------


@dataclass
class Expected:
    blocks: list[tuple[str, Any, str | None]]  # (kind, content, thought signature)
    usage: dict[str, int]
    finish: str | None
    dropped: int


def expected(exchange: Exchange) -> Expected:
    blocks: list[list[Any]] = []  # [kind, content, signature]
    dropped = 0
    grounding = False
    usage: dict[str, Any] = {}
    finish = None
    for chunk in exchange.chunks:
        candidate = (chunk.get("candidates") or [{}])[0]
        for part in (candidate.get("content") or {}).get("parts") or []:
            signature = part.get("thoughtSignature")
            last = blocks[-1] if blocks else None
            if part.get("thought"):
                if last and last[0] == "thinking":
                    last[1] += part["text"]
                    last[2] = last[2] or signature
                else:
                    blocks.append(["thinking", part["text"], signature])
            elif "text" in part:
                if last and last[0] == "text" and not (signature and last[2]):
                    last[1] += part["text"]
                    last[2] = last[2] or signature
                elif part["text"] or signature:
                    blocks.append(["text", part["text"], signature])
            elif "functionCall" in part:
                call = part["functionCall"]
                blocks.append(["tool", (call["name"], call.get("args", {})), signature])
            else:
                dropped += 1
        grounding = grounding or bool(candidate.get("groundingMetadata"))
        usage = chunk.get("usageMetadata") or usage
        finish = candidate.get("finishReason") or finish
    cached = usage.get("cachedContentTokenCount", 0)
    return Expected(
        blocks=[(kind, content, signature) for kind, content, signature in blocks],
        usage={
            "input_tokens": usage.get("promptTokenCount", 0)
            + usage.get("toolUsePromptTokenCount", 0)
            - cached,
            "output_tokens": usage.get("candidatesTokenCount", 0)
            + usage.get("thoughtsTokenCount", 0),
            "cached_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
        finish=finish,
        dropped=dropped + grounding,
    )


def observed(final: MessageComplete) -> list[tuple[str, Any, str | None]]:
    out: list[tuple[str, Any, str | None]] = []
    for block in final.final_content:
        raw = block.provider_raw.data if block.provider_raw else {}
        if isinstance(block, ThinkingBlock):
            out.append(("thinking", block.thinking, block.signature))
        elif isinstance(block, TextBlock):
            out.append(("text", block.text, raw.get("thoughtSignature")))
        elif isinstance(block, ToolUseBlock):
            out.append(("tool", (block.name, block.input), raw.get("thoughtSignature")))
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", SUCCESSES, ids=str)
async def test_a_recorded_reply_reads_as_the_recording_says(
    exchange: Exchange, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    events = await replay(exchange)
    want = expected(exchange)

    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert observed(final) == want.blocks
    assert final.usage.model_dump(exclude={"estimated"}) == want.usage
    assert final.stop_reason.raw == want.finish
    calls = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    kind = StopKind.TOOL_USE if calls else StopKind.END_TURN
    assert final.stop_reason.kind is kind
    assert all(c.id.startswith("tu_") for c in calls) and len({c.id for c in calls}) == len(calls)
    dropped = [r for r in caplog.records if getattr(r, "event", None) == "metis.lossy_projection"]
    assert len(dropped) == want.dropped, [r.getMessage() for r in dropped]
    if exchange.streamed:
        checker = StreamChecker()
        for event in events:
            checker.check(event)
        checker.check_ended()


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", FAILURES, ids=str)
async def test_a_recorded_error_is_raised_classified(exchange: Exchange) -> None:
    with pytest.raises(AdapterError) as caught:
        await replay(exchange)
    assert caught.value.provider_status == exchange.status
    assert caught.value.error_class is ErrorClass.INVALID_REQUEST
    assert caught.value.provider_code == "NOT_FOUND"
    assert "is not found" in caught.value.provider_message


# The next turn: what the recording's client sent back, we send back too -----------------------


def _recorded_model_turn(exchange: Exchange) -> dict[str, Any] | None:
    """The model content the recording's client sent back for this reply, if it did."""
    assert exchange.next_request is not None
    contents = exchange.next_request.get("contents") or []
    turns = [c for c in contents if c.get("role") == "model"]
    return turns[-1] if turns else None


FOLLOWED = [
    e
    for e in SUCCESSES
    if e.next_request is not None
    and any(c.get("role") == "model" for c in e.next_request.get("contents") or [])
    and len(e.next_request.get("contents") or []) > len(e.request.get("contents") or [])
]


def _signature_bytes(value: str) -> bytes:
    """A signature decoded (the recording's client re-encoded some as URL-safe base64)."""
    return base64.b64decode(value.replace("-", "+").replace("_", "/") + "==")


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", FOLLOWED, ids=str)
async def test_the_reply_goes_back_as_the_recorded_client_sent_it(exchange: Exchange) -> None:
    """The canonical reply, sent back to the same model in the next request, gives the model
    turn the recording's client sent: same parts, and each thought signature on its part,
    byte for byte as Gemini issued it."""
    events = await replay(exchange)
    final = events[-1]
    assert isinstance(final, MessageComplete)
    history = [Message.user("replayed"), Message(role=Role.ASSISTANT, content=final.final_content)]
    results = [
        ToolResultBlock(tool_use_id=b.id, content="done")
        for b in final.final_content
        if isinstance(b, ToolUseBlock)
    ]
    if results:
        history.append(Message.tool(*results))
    else:
        history.append(Message.user("next"))
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                 "finishReason": "STOP"}]}  # fmt: skip
        return httpx.Response(200, json=reply)

    adapter = build_adapter(
        "gemini",
        AdapterConfig(
            api_key="k", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
        ),
    )
    request = request_for(exchange).model_copy(update={"messages": history})
    await adapter.complete(request)
    ours = next(c for c in sent[0]["contents"] if c["role"] == "model")
    recorded = _recorded_model_turn(exchange)
    assert recorded is not None

    def shape(part: dict[str, Any]) -> tuple[Any, ...]:
        call = part.get("functionCall")
        what = (call["name"], call.get("args", {})) if call else part.get("text")
        signature = part.get("thoughtSignature")
        return what, _signature_bytes(signature) if signature else None

    assert [shape(p) for p in ours["parts"]] == [
        shape(p) for p in recorded["parts"] if p.get("text") != "" or p.get("thoughtSignature")
    ]
    issued = {
        p["thoughtSignature"] for c in exchange.chunks for p in _parts(c) if "thoughtSignature" in p
    }
    assert {p["thoughtSignature"] for p in ours["parts"] if "thoughtSignature" in p} <= issued


def _parts(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    candidate = (chunk.get("candidates") or [{}])[0]
    parts: list[dict[str, Any]] = (candidate.get("content") or {}).get("parts") or []
    return parts


def test_the_recordings_were_found() -> None:
    assert len(SUCCESSES) >= 20
    assert any("openai_chat/" in e.source for e in SUCCESSES)  # Gemini calls filed elsewhere
    assert any("aiplatform" in e.uri for e in SUCCESSES)
    assert FAILURES and FOLLOWED
