"""One conversation through every provider family, turn by turn (issue 4).

Anthropic, OpenAI Chat, OpenAI Responses, Gemini, Ollama, an OpenAI-compatible service (Groq)
and a text-only endpoint with emulated tools (TGI) take turns in one session, with tool calls.
Each stands behind a scripted server that refuses, like the real API, any request it would
refuse; so every turn proves that provider accepts the history all the others produced. With
thinking on, no request may carry another model's opaque reasoning.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    Message,
    Role,
    ThinkingConfig,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore

from .scripted import ScriptedProvider, _openai_body, _openai_stream, text, thinking, tools
from .scripted_gemini import ScriptedGemini
from .scripted_responses import ScriptedResponses
from .test_conformance import TOOLS, fold_stream, run_tool

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

ORDER = ["anthropic", "openai", "openai_responses", "gemini", "ollama", "groq", "tgi"]


class ScriptedOllama:
    """/api/chat in NDJSON; refuses tool messages that answer no call, or args not objects."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        called: list[str] = []
        for i, message in enumerate(body["messages"]):
            for call in message.get("tool_calls") or []:
                if not isinstance(call["function"]["arguments"], dict):
                    return _ollama_error(f"messages[{i}]: arguments must be an object")
                called.append(call["function"]["name"])
            if message["role"] == "tool" and message.get("tool_name") not in called:
                return _ollama_error(f"messages[{i}]: tool result for an unknown call")
        reply = self.script.pop(0)
        lines: list[dict[str, Any]] = []
        if reply.get("thinking"):
            lines.append(
                {"message": {"role": "assistant", "content": "", "thinking": reply["thinking"][0]}}
            )
        for piece in re.findall(r"\S+\s*", reply.get("text") or ""):
            lines.append({"message": {"role": "assistant", "content": piece}})
        calls = [{"function": {"name": n, "arguments": a}} for n, a in reply.get("tools", [])]
        if calls:
            lines.append({"message": {"role": "assistant", "content": "", "tool_calls": calls}})
        lines.append(
            {
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 50,
                "eval_count": 10,
            }
        )
        for line in lines:
            line.setdefault("model", body["model"])
            line.setdefault("done", False)
        if body.get("stream") is False:  # one JSON object with everything
            whole = dict(lines[-1])
            whole["message"] = {
                "role": "assistant",
                "content": "".join(line["message"].get("content", "") for line in lines),
                **({"thinking": reply["thinking"][0]} if reply.get("thinking") else {}),
                **({"tool_calls": calls} if calls else {}),
            }
            return httpx.Response(200, json=whole)
        text_body = "".join(json.dumps(line) + "\n" for line in lines)
        return httpx.Response(200, headers={"content-type": "application/x-ndjson"}, text=text_body)


def _ollama_error(message: str) -> httpx.Response:
    return httpx.Response(400, json={"error": message})


class ScriptedTGI:
    """A text-only model: OpenAI chunks whose text carries the tool calls as tags."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if "tools" in body:
            return httpx.Response(400, json={"error": {"message": "no native tools here"}})
        reply = self.script.pop(0)
        said = reply.get("text") or ""
        for name, args in reply.get("tools", []):
            said += f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(args)}}}</tool_call>'
        if not body.get("stream"):
            return httpx.Response(200, json=_openai_body({"text": said}, []))
        chunks = _openai_stream({"text": said}, [])
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, text="".join(chunks)
        )


def servers(script: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "anthropic": ScriptedProvider("anthropic", script),
        "openai": ScriptedProvider("openai", script),
        "openai_responses": ScriptedResponses(script),
        "gemini": ScriptedGemini(script),
        "ollama": ScriptedOllama(script),
        "groq": ScriptedProvider("openai", script),
        "tgi": ScriptedTGI(script),
    }


def adapters(peers: dict[str, Any]) -> dict[str, Adapter]:
    store = InMemoryToolIdStore()
    local = {"supports_tools": True, "supports_thinking": True, "max_context_tokens": 32768}
    built = {}
    for name, peer in peers.items():
        client = httpx.AsyncClient(transport=httpx.MockTransport(peer.handler))
        config = AdapterConfig(
            api_key="test-key",
            http_client=client,
            capabilities=local if name == "ollama" else {},
        )
        built[name] = build_adapter(name, config, tool_id_store=store)
    return built


async def converse(
    order: list[Adapter], streaming: bool, with_thinking: bool = False
) -> list[Message]:
    history = [Message.user("What's the weather in Paris?")]
    follow_ups = iter(["And in Rome?", "And in Oslo?", "Tokyo?", "Lima?", "Cairo?", "Thanks!"])
    for adapter in order:
        think = (
            ThinkingConfig(budget_tokens=1024)
            if with_thinking and adapter.capabilities.supports_thinking
            else None
        )
        request = CanonicalRequest(
            model=f"{adapter.name}:test-model",
            session_id="every-provider",
            system_prompt="Be brief.",
            messages=history,
            tools=TOOLS,
            max_output_tokens=2048,
            thinking=think,
        )
        response = await (fold_stream(adapter, request) if streaming else adapter.complete(request))
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        calls = response.tool_calls
        if calls:
            history.append(Message.tool(*(run_tool(c) for c in calls)))
        elif (follow_up := next(follow_ups, None)) is not None:
            history.append(Message.user(follow_up))
    return history


def script(reasoning: bool = False) -> list[dict[str, Any]]:
    cities = ["Paris", "Rome", "Oslo", "Tokyo", "Lima", "Cairo", "Quito"]
    out: list[dict[str, Any]] = []
    for i, city in enumerate(cities * 2):
        step = (
            tools(("get_weather", {"city": city}))
            if i % 2 == 0
            else text(f"It is sunny in {city}.")
        )
        out.append(thinking(f"Thinking about {city}.", f"sig-{i}", step) if reasoning else step)
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_conversation_visits_every_provider_family_with_tool_calls(streaming: bool) -> None:
    peers = servers(script())
    built = adapters(peers)
    order = [built[name] for name in ORDER * 2]
    history = await converse(order, streaming)

    for name, peer in peers.items():
        assert len(peer.requests) == 2, name  # every provider took both of its turns
    calls = [b for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    results = [b for m in history for b in m.content if isinstance(b, ToolResultBlock)]
    assert len(calls) == 7 and all(c.id.startswith("tu_") for c in calls)
    assert [r.tool_use_id for r in results] == [c.id for c in calls]
    assert [c.input["city"] for c in calls] == [
        "Paris",
        "Oslo",
        "Lima",
        "Quito",
        "Rome",
        "Tokyo",
        "Cairo",
    ]


@pytest.mark.anyio
async def test_with_thinking_on_no_request_carries_another_models_reasoning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="metis")
    peers = servers(script(reasoning=True))
    built = adapters(peers)
    await converse([built[name] for name in ORDER * 2], streaming=True, with_thinking=True)

    secrets = opaque_reasoning_issued(peers)
    assert secrets["anthropic"] and secrets["openai_responses"] and secrets["gemini"]
    for name, peer in peers.items():
        for body in peer.requests:
            sent = json.dumps(body)
            foreign = [
                s for owner, issued in secrets.items() if owner != name for s in issued if s in sent
            ]
            assert foreign == [], f"{name} was sent another model's reasoning: {foreign}"
    # ...and what could not be sent was dropped with a structured WARN, not silently.
    dropped = {
        r.adapter
        for r in caplog.records
        if getattr(r, "block_type", "") in ("thinking", "redacted_thinking")
    }  # type: ignore[attr-defined]
    assert {"openai", "groq", "tgi"} <= dropped


def opaque_reasoning_issued(peers: dict[str, Any]) -> dict[str, set[str]]:
    """Every signature or encrypted blob each provider handed out."""
    anthropic = {
        block["signature"]
        for body in peers["anthropic"].requests
        for message in body["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "thinking"
    }
    return {
        "anthropic": anthropic,
        "openai_responses": set(peers["openai_responses"]._reasoning.values()),
        "gemini": set(peers["gemini"].issued_signatures),
    }
