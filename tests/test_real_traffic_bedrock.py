"""Every recorded Bedrock exchange in ../shared/real-traffic/bedrock, replayed through the
bedrock stack: the request goes to the recorded URL (region filled in, model id escaped), and
the text, reasoning, tool calls, usage and stop reason are what the recording says. The
expectations are read from the recordings independently of metis: JSON bodies as stored, and
event streams through botocore's own decoder. Skipped when the folder is absent.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
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
    Role,
    TextBlock,
    ThinkingBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind
from metis.providers.bedrock_converse import codec
from metis.session import InMemoryToolIdStore
from metis.stages.invariants import StreamChecker
from tests.helpers import make_call

eventstream = pytest.importorskip("botocore.eventstream")

ROOT = Path(
    os.environ.get("METIS_REAL_TRAFFIC", Path(__file__).parents[2] / "shared" / "real-traffic")
)
pytestmark = [
    pytest.mark.real_traffic,
    pytest.mark.skipif(not (ROOT / "bedrock").is_dir(), reason=f"no recorded traffic at {ROOT}"),
]
_STOP = {
    "end_turn": StopKind.END_TURN,
    "tool_use": StopKind.TOOL_USE,
    "max_tokens": StopKind.MAX_TOKENS,
}


@dataclass
class Exchange:
    source: str
    uri: str
    status: int
    streamed: bool
    body: bytes
    parsed: dict[str, Any] | None

    def __str__(self) -> str:
        return self.source


def exchanges() -> list[Exchange]:
    found = []
    for path in sorted((ROOT / "bedrock").glob("*.yaml")) if (ROOT / "bedrock").is_dir() else []:
        for i, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            response = interaction["response"]
            raw = (response.get("body") or {}).get("string", b"")
            parsed = response.get("parsed_body")
            body = raw if isinstance(raw, bytes) and raw else json.dumps(parsed).encode()
            uri = interaction["request"]["uri"]
            found.append(
                Exchange(
                    f"{path.stem.split('__')[-1]}[{i}]",
                    uri,
                    response["status"]["code"],
                    uri.endswith("-stream"),
                    body,
                    parsed,
                )
            )
    return found


def expected(exchange: Exchange) -> dict[str, Any]:
    """Text, reasoning, tool calls, stop reason and usage, read straight from the recording."""
    out: dict[str, Any] = {"text": "", "thinking": "", "tools": [], "stop": None, "usage": None}
    if not exchange.streamed:
        assert exchange.parsed is not None
        for block in exchange.parsed["output"]["message"]["content"]:
            out["text"] += block.get("text", "")
            if "reasoningContent" in block:
                out["thinking"] += block["reasoningContent"]["reasoningText"]["text"]
            if "toolUse" in block:
                out["tools"].append((block["toolUse"]["name"], block["toolUse"]["input"]))
        out["stop"], out["usage"] = exchange.parsed["stopReason"], exchange.parsed["usage"]
        return out
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(exchange.body)
    for message in buffer:
        event = json.loads(message.payload)
        kind = message.headers[":event-type"]
        if kind == "contentBlockDelta":
            delta = event["delta"]
            out["text"] += delta.get("text", "")
            out["thinking"] += delta.get("reasoningContent", {}).get("text", "")
        elif kind == "messageStop":
            out["stop"] = event["stopReason"]
        elif kind == "metadata":
            out["usage"] = event["usage"]
    return out


def replay(exchange: Exchange, sent: list[httpx.Request]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        kind = "application/json"
        if exchange.streamed and exchange.status == 200:
            kind = "application/vnd.amazon.eventstream"

        # The stream is served in 7-byte pieces so frames arrive split at every place.
        async def pieces() -> Any:
            for i in range(0, len(exchange.body), 7):
                yield exchange.body[i : i + 7]

        return httpx.Response(exchange.status, headers={"content-type": kind}, content=pieces())

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def model_of(uri: str) -> str:
    escaped = uri.split("/model/", 1)[1].rsplit("/", 1)[0]
    return escaped.replace("%3A", ":")


@pytest.mark.anyio
@pytest.mark.parametrize("exchange", exchanges(), ids=str)
async def test_the_recording_replays_through_the_bedrock_stack(exchange: Exchange) -> None:
    sent: list[httpx.Request] = []
    adapter = build_adapter(
        "bedrock",
        AdapterConfig(
            api_key="bedrock-api-key-test",
            options={"region": "us-east-1"},
            http_client=replay(exchange, sent),
            max_retries=0,
        ),
        tool_id_store=InMemoryToolIdStore(),
    )
    request = CanonicalRequest(
        model=f"bedrock:{model_of(exchange.uri)}",
        messages=[Message.user("hello")],
        max_output_tokens=1024,
        tools=[ToolDefinition(name="any_tool")],
        stream=exchange.streamed,
    )
    if exchange.status != 200:
        with pytest.raises(AdapterError) as caught:
            await (
                adapter.complete(request)
                if not exchange.streamed
                else _drain(adapter.stream(request))
            )
        assert caught.value.error_class is ErrorClass.INVALID_REQUEST
        assert caught.value.provider_status == exchange.status
        assert "model identifier is invalid" in caught.value.message
    else:
        want = expected(exchange)
        checker = StreamChecker()
        events = [e async for e in adapter.stream(request)] if exchange.streamed else []
        for event in events:
            checker.check(event)
        if exchange.streamed:
            checker.check_ended()
            final = events[-1]
            assert isinstance(final, MessageComplete)
            content, stop, usage = final.final_content, final.stop_reason, final.usage
        else:
            response = await adapter.complete(request)
            content, stop, usage = response.content, response.stop_reason, response.usage
        assert "".join(b.text for b in content if b.type == "text") == want["text"]
        thinking = "".join(b.thinking for b in content if b.type == "thinking")
        assert thinking == want["thinking"]
        tools = [(b.name, b.input) for b in content if b.type == "tool_use"]
        assert tools == want["tools"]
        assert all(b.id.startswith("tu_") for b in content if b.type == "tool_use")
        assert stop.kind is _STOP[want["stop"]] and stop.raw == want["stop"]
        assert usage.input_tokens == want["usage"]["inputTokens"]
        assert usage.output_tokens == want["usage"]["outputTokens"]
        assert not usage.estimated
    (request_sent,) = sent
    assert str(request_sent.url) == exchange.uri
    assert request_sent.headers["authorization"] == "Bearer bedrock-api-key-test"
    await adapter.close()


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


def recorded_requests() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((ROOT / "bedrock").glob("*.yaml")) if (ROOT / "bedrock").is_dir() else []:
        for i, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            found.append(
                (f"{path.stem.split('__')[-1]}[{i}]", json.loads(interaction["request"]["body"]))
            )
    return found


def canonical_messages(body: dict[str, Any]) -> list[Message]:
    """The recorded Converse messages, read into canonical ones (by the test, not the codec)."""
    messages = []
    for message in body["messages"]:
        blocks: list[Any] = []
        for block in message["content"]:
            if "text" in block:
                blocks.append(TextBlock(text=block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                blocks.append(
                    ToolUseBlock(id=use["toolUseId"], name=use["name"], input=use["input"])
                )
            elif "toolResult" in block:
                result = block["toolResult"]
                text = "".join(part["text"] for part in result["content"])
                blocks.append(
                    ToolResultBlock(
                        tool_use_id=result["toolUseId"],
                        content=text,
                        is_error=result.get("status") == "error",
                    )
                )
            elif "reasoningContent" in block:
                reasoning = block["reasoningContent"]["reasoningText"]
                blocks.append(
                    ThinkingBlock(thinking=reasoning["text"], signature=reasoning["signature"])
                )
        messages.append(Message(role=Role(message["role"]), content=blocks))
    return messages


@pytest.mark.parametrize(
    ("name", "body"), recorded_requests(), ids=[n for n, _ in recorded_requests()]
)
def test_the_converse_encoder_writes_what_the_recorded_requests_sent(
    name: str, body: dict[str, Any]
) -> None:
    tools = [
        ToolDefinition(
            name=t["toolSpec"]["name"],
            description=t["toolSpec"].get("description", ""),
            input_schema=t["toolSpec"]["inputSchema"]["json"],
        )
        for t in (body.get("toolConfig") or {}).get("tools", [])
    ]
    thinking = (body.get("additionalModelRequestFields") or {}).get("thinking")
    request = CanonicalRequest(
        model="bedrock:m",
        messages=canonical_messages(body),
        system_prompt="\n".join(s["text"] for s in body["system"]) or None,
        max_output_tokens=body["inferenceConfig"].get("maxTokens", 4096),
        temperature=body["inferenceConfig"].get("temperature"),
        tools=tools,
        thinking=ThinkingConfig(budget_tokens=thinking["budget_tokens"]) if thinking else None,
    )
    encoded = codec.encode(request, make_call(provider="bedrock", model="bedrock:m"))
    assert encoded["messages"] == body["messages"]
    assert encoded.get("system", []) == body["system"]
    assert encoded.get("toolConfig", {}).get("tools") == (body.get("toolConfig") or {}).get("tools")
    assert encoded.get("additionalModelRequestFields") == body.get("additionalModelRequestFields")
    for key, value in body["inferenceConfig"].items():
        assert encoded["inferenceConfig"][key] == value
