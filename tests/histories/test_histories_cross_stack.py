"""Histories the next provider must accept (issue 12): a tool loop opened on each stack, with
thinking on wherever the stack can think, is left open (its tool results sent, no answer yet)
and sent, thinking still on, to every other stack. Each stands behind the emulator, which
refuses what that API refuses with a 400 (Anthropic's thinking-turn rule, DeepSeek's
reasoning_content rule, Responses' reasoning pairing, Gemini's signatures...): all accepted."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message, ThinkingConfig, ToolResultBlock
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator

from ..stack_table import DEADLINE, WEATHER

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # wire formats; sockets: test_transport and others

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-5",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
    "deepseek": "deepseek:deepseek-reasoner",
    "groq": "groq:openai/gpt-oss-120b",  # a model that reasons (the catalog says so)
    "tgi": "tgi:tgi",
}
EMULATED_AS = {"deepseek": "openai", "groq": "openai", "tgi": "openai"}
STACKS = list(MODELS)


def adapters(emulator: Emulator) -> dict[str, Adapter]:
    store = InMemoryToolIdStore()  # one session moving between providers
    built = {}
    for name in STACKS:
        local = {"supports_tools": True, "supports_thinking": True} if name == "ollama" else {}
        config = AdapterConfig(
            api_key="test-key",
            base_url=emulator.base_url(EMULATED_AS.get(name, name)),
            capabilities=local,
        )
        built[name] = build_adapter(name, config, tool_id_store=store)
    return built


def ask(adapter: Adapter, messages: list[Message], session: str) -> CanonicalRequest:
    thinks = adapter.capabilities.supports_thinking
    return CanonicalRequest(
        model=MODELS[adapter.name],
        session_id=session,
        messages=messages,
        tools=[WEATHER],
        max_output_tokens=4096,
        thinking=ThinkingConfig(budget_tokens=2048) if thinks else None,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("producer", STACKS)
async def test_an_open_tool_loop_from_one_stack_is_accepted_by_every_other(
    producer: str, emulator: Emulator
) -> None:
    built = adapters(emulator)
    session = f"open-loop-from-{producer}"
    opened = [Message.user("What's the weather in Paris?")]
    with anyio.fail_after(DEADLINE):
        first = await built[producer].complete(ask(built[producer], opened, session))
    calls = first.tool_calls
    assert calls, f"{producer} made no tool call"
    if built[producer].capabilities.supports_thinking and producer != "groq":
        assert any(b.type == "thinking" for b in first.content), producer
    history = [
        *opened,
        Message.assistant(*first.content),
        Message.tool(*(ToolResultBlock(tool_use_id=c.id, content="15 C, clear") for c in calls)),
    ]
    accepted: dict[str, Any] = {}
    for consumer in STACKS:
        if consumer == producer:
            continue
        with anyio.fail_after(DEADLINE):
            reply = await built[consumer].complete(ask(built[consumer], history, session))
        accepted[consumer] = reply.stop_reason.kind
    assert set(accepted) == set(STACKS) - {producer}
    for adapter in built.values():
        await adapter.aclose()
