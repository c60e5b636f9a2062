"""A ten-turn tool loop against the emulator, per provider (issue 23 item 4): with the default
cache policy every provider that caches reads the conversation from the cache from turn 2
on, and the loop costs less than with the policy off where the provider bills cache writes
and reads apart from plain input (Anthropic, Bedrock)."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from google.oauth2.credentials import Credentials

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.cost import cost_of
from metis.model import CachePolicy, CanonicalRequest, Message, Role, TokenUsage
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, Script, text, tools

from ..conversations import TOOLS, fold_stream, run_tool

pytestmark = pytest.mark.backend_independent

TURNS = 10
SYSTEM = "You are a careful weather assistant. Answer briefly and cite the tool. " * 120
CITIES = ["Paris", "Rome", "Oslo", "Tokyo", "Lima", "Cairo", "Quito", "Perth", "Baku"]

PROVIDERS = {
    "anthropic": "claude-sonnet-4-5",
    "vertex_anthropic": "claude-sonnet-4-5@20250929",
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock_anthropic": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "openai": "gpt-4.1",
    "openai_responses": "gpt-4.1",
    "gemini": "gemini-2.5-flash",
}
BILLED_WRITES = {"anthropic", "vertex_anthropic", "bedrock", "bedrock_anthropic"}
"""Providers that cache only where asked: off, the loop reads nothing from the cache."""


def loop_script() -> Script:
    return Script([*(tools(("get_weather", {"city": c})) for c in CITIES), text("Done.")])


def adapter_for(stack: str, emulator: Emulator) -> Adapter:
    settings: dict[str, Any] = {}
    if stack.startswith("bedrock"):
        settings = {"region": "us-east-1"}
    elif stack == "vertex_anthropic":
        token = Credentials(token="ya29.test", expiry=datetime.datetime(2999, 1, 1))
        settings = {"project": "p", "location": "us-east5", "google_credentials": token}
    config = AdapterConfig(api_key="test-key", http_client=emulator.client(), settings=settings)
    return build_adapter(stack, config, tool_id_store=InMemoryToolIdStore())


async def tool_loop(
    stack: str, policy: CachePolicy | None, streaming: bool
) -> tuple[list[TokenUsage], list[Any]]:
    """The loop's usage per turn, and the requests the emulator received."""
    model = PROVIDERS[stack]
    emulator = Emulator(model=loop_script(), models="any")  # in process: emulator.client()
    adapter = adapter_for(stack, emulator)
    history = [Message.user("Weather in nine cities, one at a time, please.")]
    usages: list[TokenUsage] = []
    for _ in range(TURNS):
        request = CanonicalRequest(
            model=f"{stack}:{model}",
            session_id="loop",
            system_prompt=SYSTEM,
            messages=history,
            tools=TOOLS,
            max_output_tokens=512,
            cache=policy,
        )
        reply = await (fold_stream(adapter, request) if streaming else adapter.complete(request))
        usages.append(reply.usage)
        history = [*history, Message(role=Role.ASSISTANT, content=reply.content)]
        if reply.tool_calls:
            history.append(Message.tool(*(run_tool(c) for c in reply.tool_calls)))
    await adapter.aclose()
    return usages, list(emulator.requests)


_DEFAULT_LOOPS: dict[tuple[str, bool], tuple[list[TokenUsage], list[Any]]] = {}


async def default_loop(stack: str, streaming: bool) -> tuple[list[TokenUsage], list[Any]]:
    """``tool_loop`` with the default cache policy, run once per stack and mode for the
    module: the loop is deterministic (a fresh emulator and script each time), and three tests
    read it (its usage, its cost against the policy off, its requests' wire form)."""
    if (stack, streaming) not in _DEFAULT_LOOPS:
        _DEFAULT_LOOPS[stack, streaming] = await tool_loop(stack, None, streaming)
    return _DEFAULT_LOOPS[stack, streaming]


def loop_cost(stack: str, usages: list[TokenUsage]) -> Decimal:
    model = f"{stack}:{PROVIDERS[stack]}"
    return sum((cost_of(model, u).usd for u in usages), Decimal(0))


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize("stack", list(PROVIDERS))
async def test_turn_two_on_reads_the_conversation_from_the_cache(
    stack: str, streaming: bool
) -> None:
    usages, _ = await default_loop(stack, streaming)
    assert len(usages) == TURNS
    for turn, usage in enumerate(usages[1:], start=2):
        previous = usages[turn - 2].total_input_tokens
        # Turn N+1 reads at least what turn N sent, less the provider's rounding (OpenAI
        # caches in steps of 128 tokens).
        assert usage.cached_input_tokens >= previous - 128, (stack, turn, usage)


@pytest.mark.anyio
@pytest.mark.parametrize("stack", sorted(BILLED_WRITES))
async def test_the_policy_makes_the_loop_cheaper(stack: str) -> None:
    on, _ = await default_loop(stack, streaming=True)
    off, _ = await tool_loop(stack, CachePolicy.off(), streaming=True)
    assert all(u.cached_input_tokens == 0 and u.cache_creation_input_tokens == 0 for u in off)
    with_policy, without = loop_cost(stack, on), loop_cost(stack, off)
    print(f"{stack}: ten-turn loop ${with_policy} with the cache policy, ${without} without")
    assert with_policy < without * Decimal("0.5")


def cache_fields(stack: str, body: dict[str, Any]) -> Any:
    """What the last request of the loop carried for the cache, in the provider's form."""
    if stack in ("anthropic", "vertex_anthropic", "bedrock_anthropic"):
        last = body["messages"][-1]["content"][-1]
        return [
            "cache_control" in body["tools"][-1],
            "cache_control" in body["system"][-1],
            "cache_control" in last,
        ]
    if stack == "bedrock":
        ends = [body["toolConfig"]["tools"][-1], body["system"][-1]]
        return [*ends, body["messages"][-1]["content"][-1]]
    if stack.startswith("openai"):
        return body.get("prompt_cache_key")
    return sorted(k for k in body if "cache" in k.lower())


WIRE = {
    "anthropic": [True, True, True],
    "vertex_anthropic": [True, True, True],
    "bedrock_anthropic": [True, True, True],
    "bedrock": [{"cachePoint": {"type": "default"}}] * 3,
    "openai": "loop",
    "openai_responses": "loop",
    "gemini": [],
}


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(PROVIDERS))
async def test_each_provider_gets_the_policy_in_its_own_form(stack: str) -> None:
    _, requests = await default_loop(stack, streaming=False)
    assert cache_fields(stack, requests[-1].json()) == WIRE[stack]
