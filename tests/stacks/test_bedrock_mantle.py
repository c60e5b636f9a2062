"""bedrock_mantle: Bedrock's OpenAI-compatible endpoint, with a Bedrock API key, the region in
its URL, and tool ids that stay distinct although Mantle restarts its numbering every reply."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.model import CanonicalRequest, Message, MessageComplete, Role, ToolDefinition
from metis.model.content import ToolResultBlock
from metis.pipeline.stores import InMemoryToolIdStore
from metis.registry import NotConfiguredError, Registry

MODEL = "bedrock_mantle:openai.gpt-oss-120b-1:0"


def tool_call_stream() -> bytes:
    """A Chat Completions stream calling one tool, always as ``call_0`` (what Mantle does)."""
    chunks: list[dict[str, Any]] = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_0",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": ""},
                            }
                        ],
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"arguments": '{"q": "x"}'}}]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
    ]
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


@pytest.mark.anyio
async def test_each_reply_s_call_0_gets_its_own_canonical_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            200, content=tool_call_stream(), headers={"content-type": "text/event-stream"}
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    adapter = build_adapter(
        "bedrock_mantle",
        AdapterConfig(api_key="ABSKkey", http_client=client),
        tool_id_store=InMemoryToolIdStore(),
    )
    tools = [ToolDefinition(name="lookup")]
    history = [Message.user("look it up")]
    ids = []
    for _ in range(2):
        request = CanonicalRequest(
            model=MODEL, session_id="s", messages=history, max_output_tokens=64, tools=tools
        )
        final = [e async for e in adapter.stream(request)][-1]
        assert isinstance(final, MessageComplete)
        (call,) = final.final_content
        ids.append(call.id)  # type: ignore[union-attr]
        history = [
            *history,
            Message(role=Role.ASSISTANT, content=[call]),
            Message(role=Role.USER, content=[ToolResultBlock(tool_use_id=call.id, content="ok")]),
        ]  # type: ignore[union-attr]
    assert ids[0] != ids[1]
    second = json.loads(sent[1].content)
    sent_ids = [c["id"] for m in second["messages"] for c in m.get("tool_calls") or []]
    assert sent_ids and "call_0" not in sent_ids
    assert str(sent[0].url) == "https://bedrock-mantle.us-west-2.api.aws/v1/chat/completions"
    assert sent[0].headers["authorization"] == "Bearer ABSKkey"
    await adapter.aclose()


@pytest.mark.anyio
async def test_without_a_region_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    sent: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(500))
    )
    adapter = build_adapter("bedrock_mantle", AdapterConfig(api_key="ABSKkey", http_client=client))
    request = CanonicalRequest(model=MODEL, messages=[Message.user("hi")], max_output_tokens=8)
    with pytest.raises(NotConfiguredError, match="AWS_REGION"):
        await adapter.complete(request)
    assert sent == []


def test_without_a_bedrock_api_key_the_registry_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    registry = Registry.from_dict(
        {
            "adapters": {"mantle": {"type": "bedrock_mantle"}},
            "models": {
                "mantle:gpt-oss": {"adapter": "mantle", "wire_name": "openai.gpt-oss-120b-1:0"}
            },
        }
    )
    with pytest.raises(NotConfiguredError, match="AWS_BEARER_TOKEN_BEDROCK"):
        registry.resolve("mantle:gpt-oss")
