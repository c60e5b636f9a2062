"""Every recorded Anthropic and OpenAI Chat exchange in ../shared/real-traffic, replayed
through the full adapters: no exception, invariants hold, and text, tool calls, usage and the
raw stop reason match what the recording says. Expectations are read from the recording here,
independently of the codecs. Skipped when the folder is absent (a fresh clone).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from metis import AdapterConfig, AdapterError, ErrorClass, build_adapter
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    RedactedThinkingBlock,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.stages.invariants import StreamChecker

ROOT = Path(
    os.environ.get("METIS_REAL_TRAFFIC", Path(__file__).parents[2] / "shared" / "real-traffic")
)
pytestmark = [
    pytest.mark.real_traffic,
    pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}"),
]
CANONICAL_ANTHROPIC_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}


@dataclass
class Exchange:
    source: str
    provider: str  # "anthropic" | "openai"
    status: int
    streamed: bool
    body: bytes
    request: dict[str, Any]
    response_json: dict[str, Any] | None = field(default=None)

    def __str__(self) -> str:
        return self.source


def exchanges() -> list[Exchange]:
    if not ROOT.is_dir():
        return []
    found = []
    for path in sorted(ROOT.glob("*/*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for i, interaction in enumerate(doc.get("interactions") or []):
            uri = interaction["request"]["uri"]
            if "api.anthropic.com/v1/messages?" in uri or uri.endswith(
                "api.anthropic.com/v1/messages"
            ):
                provider = "anthropic"
            elif uri.endswith("/v1/chat/completions"):
                provider = "openai"
            else:
                continue
            response = interaction["response"]
            headers = {k.lower(): v[0] for k, v in (response.get("headers") or {}).items()}
            if "string" in (response.get("body") or {}):
                body = response["body"]["string"].encode()
                parsed = None
            else:
                parsed = response["parsed_body"]
                body = json.dumps(parsed).encode()
            found.append(
                Exchange(
                    source=f"{path.parent.name}/{path.name}#{i}",
                    provider=provider,
                    status=response["status"]["code"],
                    streamed="event-stream" in headers.get("content-type", ""),
                    body=body,
                    request=interaction["request"].get("parsed_body") or {},
                    response_json=parsed,
                )
            )
    return found


EXCHANGES = exchanges()


def adapter_for(exchange: Exchange, chunk_size: int = 97):  # type: ignore[no-untyped-def]
    content_type = "text/event-stream" if exchange.streamed else "application/json"

    def handler(request: httpx.Request) -> httpx.Response:
        chunks = [
            exchange.body[i : i + chunk_size] for i in range(0, len(exchange.body), chunk_size)
        ]
        return httpx.Response(
            exchange.status, headers={"content-type": content_type}, stream=_Stream(chunks)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return build_adapter(exchange.provider, AdapterConfig(api_key="k", http_client=client))


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for chunk in self.chunks:
            yield chunk


def request_for(exchange: Exchange) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{exchange.provider}:{exchange.request.get('model', 'recorded')}",
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
    blocks: list[tuple[str, Any]]  # ("text", str) | ("tool", (name, input)) | ("thinking", sig)
    usage: dict[str, int]
    stop_reason: str | None
    dropped: int


def sse_payloads(body: bytes) -> list[dict[str, Any]]:
    out = []
    for line in body.decode().splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            out.append(json.loads(line[5:]))
    return out


def expected_anthropic(exchange: Exchange) -> Expected:
    usage: dict[str, int] = {}
    stop = None
    if exchange.streamed:
        starts: dict[int, dict[str, Any]] = {}
        texts: dict[int, list[str]] = {}
        for obj in sse_payloads(exchange.body):
            if obj["type"] == "message_start":
                usage.update(
                    {k: v for k, v in obj["message"]["usage"].items() if isinstance(v, int)}
                )
            elif obj["type"] == "content_block_start":
                starts[obj["index"]] = dict(obj["content_block"])
                texts[obj["index"]] = []
            elif obj["type"] == "content_block_delta":
                delta = obj["delta"]
                piece = delta.get("text") or delta.get("partial_json") or delta.get("thinking")
                if piece:
                    texts[obj["index"]].append(piece)
                if delta["type"] == "signature_delta":
                    starts[obj["index"]]["signature"] = delta["signature"]
            elif obj["type"] == "message_delta":
                stop = obj["delta"].get("stop_reason")
                usage.update(
                    {k: v for k, v in (obj.get("usage") or {}).items() if isinstance(v, int)}
                )
        content = []
        for index in sorted(starts):
            block = starts[index]
            joined = "".join(texts[index])
            if block["type"] == "text":
                block["text"] = block.get("text", "") + joined
            elif block["type"] == "tool_use":
                block["input"] = json.loads(joined) if joined else block.get("input", {})
            elif block["type"] == "thinking":
                block["thinking"] = joined
            content.append(block)
    else:
        assert exchange.response_json is not None
        content = exchange.response_json["content"]
        stop = exchange.response_json["stop_reason"]
        usage = {k: v for k, v in exchange.response_json["usage"].items() if isinstance(v, int)}
    blocks: list[tuple[str, Any]] = []
    for block in content:
        if block["type"] == "text" and block["text"]:
            blocks.append(("text", block["text"]))
        elif block["type"] == "tool_use":
            blocks.append(("tool", (block["name"], block["input"])))
        elif block["type"] == "thinking":
            blocks.append(("thinking", block.get("signature")))
        elif block["type"] == "redacted_thinking":
            blocks.append(("redacted", block["data"]))
    return Expected(
        blocks=blocks,
        usage={
            "input_tokens": usage.get("input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
            "cached_input_tokens": usage.get("cache_read_input_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        },
        stop_reason=stop,
        dropped=sum(1 for b in content if b["type"] not in CANONICAL_ANTHROPIC_BLOCKS),
    )


def expected_openai(exchange: Exchange) -> Expected:
    text: list[str] = []
    calls: dict[int, list[Any]] = {}
    stop = None
    usage: dict[str, Any] = {}
    if exchange.streamed:
        for obj in sse_payloads(exchange.body):
            if obj.get("usage"):
                usage = obj["usage"]
            for choice in obj.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                for call in delta.get("tool_calls") or []:
                    entry = calls.setdefault(call["index"], [None, ""])
                    entry[0] = entry[0] or call.get("function", {}).get("name")
                    entry[1] += call.get("function", {}).get("arguments") or ""
                stop = choice.get("finish_reason") or stop
    else:
        assert exchange.response_json is not None
        choice = exchange.response_json["choices"][0]
        if choice["message"].get("content"):
            text.append(choice["message"]["content"])
        for i, call in enumerate(choice["message"].get("tool_calls") or []):
            calls[i] = [call["function"]["name"], call["function"]["arguments"]]
        stop = choice["finish_reason"]
        usage = exchange.response_json.get("usage") or {}
    blocks: list[tuple[str, Any]] = [("text", "".join(text))] if text else []
    blocks += [("tool", (name, json.loads(args or "{}"))) for name, args in calls.values()]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Expected(
        blocks=blocks,
        usage={
            "input_tokens": usage.get("prompt_tokens", 0) - cached,
            "output_tokens": usage.get("completion_tokens", 0),
            "cached_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
        stop_reason=stop,
        dropped=0,
    )


def observed(final: MessageComplete) -> list[tuple[str, Any]]:
    blocks: list[tuple[str, Any]] = []
    for block in final.final_content:
        if isinstance(block, TextBlock):
            blocks.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            blocks.append(("tool", (block.name, block.input)))
        elif isinstance(block, ThinkingBlock):
            blocks.append(("thinking", block.signature))
        elif isinstance(block, RedactedThinkingBlock):
            blocks.append(("redacted", block.data))
    return blocks


SUCCESSES = [e for e in EXCHANGES if e.status == 200]
FAILURES = [e for e in EXCHANGES if e.status != 200]


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", SUCCESSES, ids=str)
async def test_a_recorded_reply_reads_as_the_recording_says(
    exchange: Exchange, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    events = await replay(exchange)
    expected = (expected_anthropic if exchange.provider == "anthropic" else expected_openai)(
        exchange
    )

    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert observed(final) == expected.blocks
    assert final.usage.model_dump(exclude={"estimated"}) == expected.usage
    assert final.stop_reason.raw == expected.stop_reason
    dropped = [r for r in caplog.records if getattr(r, "event", None) == "metis.lossy_projection"]
    assert len(dropped) == expected.dropped
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
    assert caught.value.provider_message


def test_the_recordings_were_found() -> None:
    providers = {e.provider for e in EXCHANGES}
    assert providers == {"anthropic", "openai"}
    assert len(SUCCESSES) >= 30
