"""One conversation through every provider family, turn by turn (issue 4).

Anthropic, OpenAI Chat, OpenAI Responses, Gemini, Ollama, an OpenAI-compatible service (Groq)
and a text-only endpoint with emulated tools (TGI) take turns in one session, with tool calls.
Each is the emulator in scripted mode, refusing, like the real API, any request it would
refuse; so every turn proves that provider accepts the history all the others produced. With
thinking on, no request may carry another model's opaque reasoning.
"""

from __future__ import annotations

import json
from typing import Any

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
from metis.testing.emulator import Emulator, Reply, Script, text, thinking, tools
from metis.testing.emulator.formats.gemini_rules import BYPASS

from .test_conformance import TOOLS, fold_stream, run_tool

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

ORDER = ["anthropic", "openai", "openai_responses", "gemini", "ollama", "groq", "tgi"]


def servers(script: list[Reply]) -> dict[str, Emulator]:
    """An emulator per provider, all answering from one script (so each keeps its own
    requests: Groq and TGI are served by the same format as OpenAI)."""
    shared = Script(script)
    return {name: Emulator(model=shared, models="any") for name in ORDER}


def adapters(peers: dict[str, Any]) -> dict[str, Adapter]:
    store = InMemoryToolIdStore()
    local = {"supports_tools": True, "supports_thinking": True, "max_context_tokens": 32768}
    built = {}
    for name, peer in peers.items():
        config = AdapterConfig(
            api_key="test-key",
            http_client=peer.client(),
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


def script(reasoning: bool = False) -> list[Reply]:
    cities = ["Paris", "Rome", "Oslo", "Tokyo", "Lima", "Cairo", "Quito"]
    out: list[Reply] = []
    for i, city in enumerate(cities * 2):
        step = (
            tools(("get_weather", {"city": city}))
            if i % 2 == 0
            else text(f"It is sunny in {city}.")
        )
        out.append(thinking(f"Thinking about {city}.", step) if reasoning else step)
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
    assert all("tools" not in body for body in peers["tgi"].bodies())  # emulated tools only
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
        for body in peer.bodies():
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


def opaque_reasoning_issued(peers: dict[str, Emulator]) -> dict[str, set[str]]:
    """Every signature or encrypted blob each provider handed out (and was sent back)."""
    anthropic = {
        block["signature"]
        for body in peers["anthropic"].bodies()
        for message in body["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "thinking"
    }
    responses = {
        item.get("encrypted_content") or item["id"]
        for items in peers["openai_responses"].stored.values()
        for item in items
        if item.get("type") == "reasoning"
    }
    gemini = {
        part["thoughtSignature"]
        for body in peers["gemini"].bodies()
        for content in body["contents"]
        for part in content["parts"]
        if part.get("thoughtSignature", BYPASS) != BYPASS
    }
    return {"anthropic": anthropic, "openai_responses": responses, "gemini": gemini}
