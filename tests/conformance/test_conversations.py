"""Conversations across stacks (docs/contract.md): substitutability, mid-session swaps, tool
ids, and opaque reasoning that never reaches another model.

Every stack is the emulator, refusing (400) what its real API would refuse; so each turn
proves that stack accepts the history all the others produced. The swaps: Anthropic and OpenAI
alternating; every provider family in turn; OpenAI with the compatible stacks (Mistral's
9-character ids, each server's absent fields); and one tool conversation visiting every
platform (tests/stack_table.py's ROTATION).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import anyio
import pytest

from metis.adapter import Adapter
from metis.core.ids import derive_provider_tool_id
from metis.model import (
    CanonicalRequest,
    Message,
    Role,
    ThinkingBlock,
    ThinkingConfig,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, Reply, Script, text, thinking, tools
from metis.testing.emulator.formats.gemini_rules import BYPASS

from ..conversations import (
    TOOLS,
    adapters_for,
    converse,
    fold_stream,
    run_tool,
    script,
    scripted,
)
from ..stack_table import ROTATION, adapter, ask
from .test_compatible_stacks import STACKS as COMPATIBLE

pytestmark = pytest.mark.usefixtures("no_backoff")

# Anthropic and OpenAI, turn by turn ----------------------------------------------------------


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_six_turn_conversation_alternating_providers_is_accepted_every_turn(
    streaming: bool,
) -> None:
    emulator = scripted(script())
    adapters = adapters_for(emulator, "anthropic", "openai")
    order = [adapters["anthropic"], adapters["openai"]] * 3
    history = await converse(order, streaming)

    assert len(emulator.bodies("anthropic")) == 3 and len(emulator.bodies("openai")) == 3
    assert history[-1].text == "Paris sunny, Berlin cloudy, Rome hot."
    canonical_ids = [b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    assert len(canonical_ids) == 4 and all(i.startswith("tu_") for i in canonical_ids)


@pytest.mark.backend_independent
@pytest.mark.anyio
async def test_tool_ids_stay_consistent_across_the_swap() -> None:
    emulator = scripted(script())
    adapters = adapters_for(emulator, "anthropic", "openai")
    history = await converse([adapters["anthropic"], adapters["openai"]] * 3, streaming=True)
    first_call = next(b for m in history for b in m.content if isinstance(b, ToolUseBlock))
    anthropic_issued = emulator.call_ids("anthropic")[0]

    # OpenAI never saw this call: it gets an id derived from the canonical one, in both the
    # assistant's tool_calls and the tool message that answers it, on every OpenAI turn.
    derived = derive_provider_tool_id(first_call.id, "call_")
    for body in emulator.bodies("openai"):
        assistant = next(m for m in body["messages"] if m.get("tool_calls"))
        assert assistant["tool_calls"][0]["id"] == derived
        answer = next(m for m in body["messages"] if m["role"] == "tool")
        assert answer["tool_call_id"] == derived

    # Back on Anthropic, the call carries the id Anthropic itself issued for it.
    for body in emulator.bodies("anthropic")[1:]:
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        tool_use = next(b for b in assistant["content"] if b["type"] == "tool_use")
        assert tool_use["id"] == anthropic_issued
        answer = body["messages"][2]["content"][0]
        assert answer == {
            "type": "tool_result",
            "tool_use_id": anthropic_issued,
            "content": "Paris: sunny, 21C",
        }

    # And OpenAI's own calls go back to OpenAI under the ids OpenAI issued.
    last_openai = emulator.bodies("openai")[-1]
    sent_ids = [c["id"] for m in last_openai["messages"] for c in m.get("tool_calls") or []]
    assert emulator.call_ids("openai")[0] in sent_ids


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_each_adapter_alone_produces_the_same_canonical_conversation(streaming: bool) -> None:
    histories = []
    for flavour in ("anthropic", "openai"):
        alone = adapters_for(scripted(script()), flavour)[flavour]
        histories.append(_without_ids(await converse([alone] * 6, streaming)))
    assert histories[0] == histories[1]


def _without_ids(history: list[Message]) -> list[dict[str, Any]]:
    """The conversation with canonical tool ids replaced by their order of appearance."""
    dumped = json.dumps([m.model_dump(mode="json") for m in history])
    ids = list(dict.fromkeys(re.findall(r"tu_[0-9A-Z]{26}", dumped)))
    for n, tool_id in zip(itertools.count(), ids, strict=False):
        dumped = dumped.replace(tool_id, f"tool-{n}")
    return json.loads(dumped)  # type: ignore[no-any-return]


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_signed_thinking_goes_back_only_to_the_model_that_made_it(
    streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    replies = [
        thinking("Paris first.", tools(("get_weather", {"city": "Paris"}))),
        text("Sunny in Paris."),
        text("Still sunny."),
        text("Sunny, says the other model."),
    ]
    emulator = scripted(replies)
    adapters = adapters_for(emulator, "anthropic", "openai")
    history = [Message.user("Weather in Paris?")]

    async def turn(adapter: Adapter, model: str) -> None:
        nonlocal history
        request = CanonicalRequest(
            model=model,
            session_id="signed-reasoning",
            messages=history,
            tools=TOOLS,
            max_output_tokens=512,
        )
        response = await (fold_stream(adapter, request) if streaming else adapter.complete(request))
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        if response.tool_calls:
            history.append(Message.tool(*(run_tool(c) for c in response.tool_calls)))
        else:
            history.append(Message.user("And now?"))

    await turn(adapters["anthropic"], "anthropic:claude-a")
    thought = history[1].content[0]
    assert thought.type == "thinking" and thought.signature  # type: ignore[union-attr]

    await turn(adapters["anthropic"], "anthropic:claude-a")  # same model: sent back, signed
    sent = emulator.bodies("anthropic")[-1]["messages"][1]["content"][0]
    signature = thought.signature  # type: ignore[union-attr]
    assert sent == {"type": "thinking", "thinking": "Paris first.", "signature": signature}

    caplog.clear()
    caplog.set_level("WARNING", logger="metis")
    await turn(adapters["openai"], "openai:gpt-x")  # another provider: dropped with one WARN
    assert "thinking" not in json.dumps(emulator.bodies("openai")[-1])
    await turn(adapters["anthropic"], "anthropic:claude-b")  # another model: dropped too
    assert all(
        block["type"] != "thinking"
        for message in emulator.bodies("anthropic")[-1]["messages"]
        for block in message["content"]
    )
    warnings = [r for r in caplog.records if getattr(r, "block_type", None) == "thinking"]
    assert [(r.adapter, r.session_id) for r in warnings] == [  # type: ignore[attr-defined]
        ("openai", "signed-reasoning"),
        ("anthropic", "signed-reasoning"),
    ]
    assert "produced by anthropic" in warnings[0].reason  # type: ignore[attr-defined]
    assert "model anthropic:claude-a" in warnings[1].reason  # type: ignore[attr-defined]


# Every provider family, turn by turn ----------------------------------------------------------

FAMILY_ORDER = ["anthropic", "openai", "openai_responses", "gemini", "ollama", "groq", "tgi"]
FAMILY_TURNS = ["What's the weather in Paris?", "And in Rome?", "And in Oslo?", "Tokyo?"]
FAMILY_TURNS += ["Lima?", "Cairo?", "Thanks!"]


def family_servers(replies: list[Reply]) -> dict[str, Emulator]:
    """An emulator per family, all answering from one script (so each keeps its own
    requests: Groq and TGI are served by the same format as OpenAI)."""
    shared = Script(replies)
    return {name: Emulator(model=shared, models="any") for name in FAMILY_ORDER}


def family_adapters(peers: dict[str, Emulator]) -> dict[str, Adapter]:
    from metis import AdapterConfig, build_adapter

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


def city_script(reasoning: bool = False) -> list[Reply]:
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


async def family_conversation(
    peers: dict[str, Emulator], streaming: bool, with_thinking: bool = False
) -> list[Message]:
    built = family_adapters(peers)
    return await converse(
        [built[name] for name in FAMILY_ORDER * 2],
        streaming,
        turns=FAMILY_TURNS,
        session_id="every-provider",
        max_output_tokens=2048,
        with_thinking=with_thinking,
    )


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_conversation_visits_every_provider_family_with_tool_calls(streaming: bool) -> None:
    peers = family_servers(city_script())
    history = await family_conversation(peers, streaming)

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


@pytest.mark.backend_independent
@pytest.mark.anyio
async def test_with_thinking_on_no_request_carries_another_models_reasoning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="metis")
    peers = family_servers(city_script(reasoning=True))
    await family_conversation(peers, streaming=True, with_thinking=True)

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


# OpenAI and the compatible stacks, turn by turn ----------------------------------------------

MISTRAL_ID = re.compile(r"^[A-Za-z0-9]{9}$")


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize("pair", [("mistral", "deepseek"), ("groq", "llamacpp")])
async def test_a_conversation_alternating_openai_and_compatible_stacks(
    streaming: bool, pair: tuple[str, str]
) -> None:
    """The compatible stacks' requests are checked by the emulator's OpenAI rules, and
    Mistral's ids by its own. Each stack has its own emulator, all answering from one script."""
    from metis import AdapterConfig, build_adapter

    shared = Script(script())
    providers = {name: Emulator(model=shared, models="any") for name in ("openai", *pair)}
    store = InMemoryToolIdStore()
    adapters = {
        name: build_adapter(
            name,
            AdapterConfig(api_key="test-key", http_client=provider.client()),
            tool_id_store=store,
        )
        for name, provider in providers.items()
    }
    order = [adapters[name] for name in ["openai", *pair] * 2]
    history = await converse(order, streaming, session_id="compat-swap")

    assert history[-1].text == "Paris sunny, Berlin cloudy, Rome hot."
    assert [len(p.requests) for p in providers.values()] == [2, 2, 2]
    canonical = [b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    assert len(canonical) == 4 and all(i.startswith("tu_") for i in canonical)

    if "mistral" in pair:  # every id Mistral is sent is one it issued or a 9-character one
        own = set(providers["mistral"].call_ids())
        for body in providers["mistral"].bodies():
            for message in body["messages"]:
                ids = [c["id"] for c in message.get("tool_calls") or []]
                ids += [message["tool_call_id"]] if message["role"] == "tool" else []
                for tool_id in ids:
                    assert tool_id in own or MISTRAL_ID.match(tool_id), tool_id
    for name in pair:  # each stack's own quirks held on every turn
        for body in providers[name].bodies():
            for key in COMPATIBLE[name].absent:
                assert key not in body, (name, key)


# Every platform, turn by turn -------------------------------------------------------------


@pytest.mark.backend_independent
@pytest.mark.anyio
async def test_a_tool_conversation_visits_every_platform_and_each_accepts_its_history(
    emulator: Emulator,
) -> None:
    store = InMemoryToolIdStore()
    adapters = {stack: adapter(stack, emulator, store) for stack in ROTATION}
    history = [Message.user("What's the weather in Paris, then in Rome, then in Oslo?")]
    served: list[str] = []
    with anyio.fail_after(60):
        for stack in ROTATION:
            reply = await adapters[stack].complete(ask(stack, history))
            served.append(f"{stack}:{reply.stop_reason.kind.value}")
            history.append(reply.message)
            if reply.tool_calls:
                assert all(call.id.startswith("tu_") for call in reply.tool_calls), stack
                results = [
                    ToolResultBlock(tool_use_id=call.id, content="sunny, 21 C")
                    for call in reply.tool_calls
                ]
                history.append(Message.tool(*results))
            else:
                history.append(Message.user("And the next city?"))
    assert len(served) == len(ROTATION)
    assert any(s.endswith(":tool_use") for s in served)  # ids crossed platforms
    for built in adapters.values():
        await built.aclose()


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("platform", ["bedrock_anthropic", "vertex_anthropic"])
async def test_reasoning_signed_on_one_platform_is_not_sent_to_another(
    emulator: Emulator, platform: str
) -> None:
    store = InMemoryToolIdStore()
    home = adapter("anthropic", emulator, store)
    history = [Message.user("Think it over: what's the weather in Paris?")]
    first = await home.complete(
        ask("anthropic", history, thinking=ThinkingConfig(budget_tokens=1024))
    )
    signed = [b for b in first.content if isinstance(b, ThinkingBlock) and b.signature]
    assert signed, "the emulator signs Claude's thinking"
    history.append(first.message)
    if first.tool_calls:
        history.append(
            Message.tool(
                *(ToolResultBlock(tool_use_id=c.id, content="sunny") for c in first.tool_calls)
            )
        )
    else:
        history.append(Message.user("Thanks. And Rome?"))
    away = adapter(platform, emulator, store)
    second = await away.complete(ask(platform, history))
    sent = json.dumps(emulator.requests[-1].json())
    assert signed[0].signature not in sent  # the same model, another platform: not sent
    assert [w.block_type for w in second.warnings] == ["thinking"]
    await home.aclose()
    await away.aclose()
