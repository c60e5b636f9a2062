"""Every recorded OpenAI Responses exchange in ../shared/real-traffic/openai_responses, replayed
through the full ``openai_responses`` adapter: no exception, invariants hold, and text,
function calls, reasoning (summary and encrypted content), usage, stop reason and reply id
match what the recording says; each item outside the canonical model gives exactly one WARN.
Expectations are read from the recordings here, independently of the codec: from each
item's ``response.output_item.done`` (a streamed reply) or the body's ``output``, and from the
final ``response`` object. Skipped when the folder is absent (a fresh clone).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
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
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.session import InMemoryToolIdStore
from metis.stages.invariants import StreamChecker

ROOT = Path(
    os.environ.get("METIS_REAL_TRAFFIC", Path(__file__).parents[2] / "shared" / "real-traffic")
)
FOLDER = ROOT / "openai_responses"
pytestmark = [
    pytest.mark.real_traffic,
    pytest.mark.skipif(not FOLDER.is_dir(), reason=f"no recorded traffic at {FOLDER}"),
]
CANONICAL_ITEMS = {"message", "function_call", "reasoning"}


@dataclass
class Exchange:
    source: str
    status: int
    streamed: bool
    body: bytes

    def __str__(self) -> str:
        return self.source


def exchanges() -> list[Exchange]:
    if not FOLDER.is_dir():
        return []
    found = []
    for path in sorted(FOLDER.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for i, interaction in enumerate(doc.get("interactions") or []):
            if not interaction["request"]["uri"].endswith("/v1/responses"):
                continue
            response = interaction["response"]
            headers = {k.lower(): v[0] for k, v in (response.get("headers") or {}).items()}
            if "string" in (response.get("body") or {}):
                body = response["body"]["string"].encode()
            else:
                body = json.dumps(response["parsed_body"]).encode()
            found.append(
                Exchange(
                    source=f"{path.name}#{i}",
                    status=response["status"]["code"],
                    streamed="event-stream" in headers.get("content-type", ""),
                    body=body,
                )
            )
    return found


EXCHANGES = exchanges()
SUCCESSES = [e for e in EXCHANGES if e.status == 200]
FAILURES = [e for e in EXCHANGES if e.status != 200]


def adapter_for(exchange: Exchange, chunk_size: int) -> Adapter:
    content_type = "text/event-stream" if exchange.streamed else "application/json"
    chunks = [exchange.body[i : i + chunk_size] for i in range(0, len(exchange.body), chunk_size)]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            exchange.status, headers={"content-type": content_type}, stream=_Stream(chunks)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return build_adapter(
        "openai_responses",
        AdapterConfig(api_key="k", http_client=client),
        tool_id_store=InMemoryToolIdStore(),
    )


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        for chunk in self.chunks:
            yield chunk


async def replay(exchange: Exchange, chunk_size: int = 97) -> list[StreamEvent]:
    adapter = adapter_for(exchange, chunk_size)
    request = CanonicalRequest(
        model="openai_responses:recorded",
        messages=[Message.user("replayed")],
        max_output_tokens=1000,
        session_id="replay",
    )
    if exchange.streamed:
        return [event async for event in adapter.stream(request)]
    response = await adapter.complete(request)
    return [
        MessageComplete(response.content, response.stop_reason, response.usage, response.message_id)
    ]


# Expectations read straight from the recordings ---------------------------------------------


@dataclass
class Expected:
    blocks: list[tuple[str, Any]]
    usage: dict[str, int]
    stop: tuple[StopKind, str | None]
    dropped: list[str]
    response_id: str


def sse_payloads(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[5:])
        for line in body.decode().splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


def expected(exchange: Exchange) -> Expected:
    if exchange.streamed:
        payloads = sse_payloads(exchange.body)
        final = next(p["response"] for p in payloads if p["type"] == "response.completed")
        done = {
            p["output_index"]: p["item"]
            for p in payloads
            if p["type"] == "response.output_item.done"
        }
        items = [done[i] for i in sorted(done)]
    else:
        final = json.loads(exchange.body)
        items = final["output"]
    blocks: list[tuple[str, Any]] = []
    for item in items:
        if item["type"] == "message":
            text = "".join(p.get("text") or p.get("refusal") or "" for p in item["content"])
            if text:
                blocks.append(("text", text))
        elif item["type"] == "function_call":
            blocks.append(("tool", (item["name"], json.loads(item["arguments"] or "{}"))))
        elif item["type"] == "reasoning":
            summary = "\n\n".join(p["text"] for p in item.get("summary") or [])
            if summary or item.get("encrypted_content"):
                blocks.append(("thinking", (summary, item.get("encrypted_content"))))
    usage = final["usage"]
    details = usage.get("input_tokens_details") or {}
    cached, written = details.get("cached_tokens", 0), details.get("cache_write_tokens", 0)
    dropped = [item["type"] for item in items if item["type"] not in CANONICAL_ITEMS]
    calls = any(item["type"] == "function_call" for item in items)
    # Items with no canonical form are dropped and never decide the stop.
    stop = (StopKind.TOOL_USE if calls else StopKind.END_TURN, "completed")
    assert final["status"] == "completed"  # every recorded reply did complete
    return Expected(
        blocks=blocks,
        usage={
            "input_tokens": usage["input_tokens"] - cached - written,
            "output_tokens": usage["output_tokens"],
            "cached_input_tokens": cached,
            "cache_creation_input_tokens": written,
        },
        stop=stop,
        dropped=dropped,
        response_id=final["id"],
    )


def observed(final: MessageComplete) -> list[tuple[str, Any]]:
    blocks: list[tuple[str, Any]] = []
    for block in final.final_content:
        if isinstance(block, TextBlock):
            blocks.append(("text", block.text))
        elif isinstance(block, ToolUseBlock):
            blocks.append(("tool", (block.name, block.input)))
        elif isinstance(block, ThinkingBlock):
            blocks.append(("thinking", (block.thinking, block.signature)))
    return blocks


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
    assert (final.stop_reason.kind, final.stop_reason.raw) == want.stop
    assert final.message_id == want.response_id
    warned = [
        r.__dict__["block_type"]
        for r in caplog.records
        if getattr(r, "event", None) == "metis.lossy_projection"
    ]
    assert warned == want.dropped
    if exchange.streamed:
        checker = StreamChecker()
        for event in events:
            checker.check(event)
        checker.check_ended()
    # Every canonical block of this provider knows the item it came from.
    for block in final.final_content:
        assert block.provider_raw is not None and block.provider_raw.provider == "openai_responses"
        assert block.provider_raw.data["id"].startswith(("msg_", "fc_", "rs_"))


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", [e for e in SUCCESSES if e.streamed], ids=str)
async def test_chunk_boundaries_do_not_matter(exchange: Exchange) -> None:
    small = (await replay(exchange, chunk_size=7))[-1]
    large = (await replay(exchange, chunk_size=65536))[-1]
    assert isinstance(small, MessageComplete) and isinstance(large, MessageComplete)
    assert observed(small) == observed(large)
    assert small.usage == large.usage and small.stop_reason == large.stop_reason


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", FAILURES, ids=str)
async def test_a_recorded_error_is_raised_classified(exchange: Exchange) -> None:
    with pytest.raises(AdapterError) as caught:
        await replay(exchange)
    error = json.loads(exchange.body)["error"]
    assert caught.value.error_class is ErrorClass.INVALID_REQUEST
    assert caught.value.provider_status == exchange.status == 400
    assert caught.value.provider_message == error["message"]
    assert caught.value.provider_code == error["code"]
    assert caught.value.retryable is False


def test_the_recordings_were_found() -> None:
    assert len(SUCCESSES) >= 15 and len(FAILURES) >= 2
    assert any(not e.streamed for e in SUCCESSES)  # one non-streamed JSON body
