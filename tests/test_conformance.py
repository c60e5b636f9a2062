"""Cross-adapter conformance (docs/contract.md): substitutability, mid-session swap, tool ids.

A six-turn conversation with tool calls alternates Anthropic and OpenAI. Both are the emulator
in its scripted mode, answering from one script: it refuses, with a 400, any request the real
API would refuse, so every turn proves that adapter accepts the history the other made.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.core.ids import derive_provider_tool_id
from metis.model import (
    CanonicalRequest,
    CanonicalResponse,
    Message,
    Role,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, Reply, text, thinking, tools

from .helpers import answer

TOOLS = [
    ToolDefinition(
        name="get_weather",
        description="Current weather for a city",
        input_schema={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    ),
    ToolDefinition(
        name="to_fahrenheit",
        description="Convert Celsius to Fahrenheit",
        input_schema={
            "type": "object",
            "properties": {"celsius": {"type": "number"}},
            "required": ["celsius"],
        },
    ),
]


def script() -> list[Reply]:
    return [
        tools(("get_weather", {"city": "Paris"})),
        text("Sunny and 21 °C in Paris."),
        tools(
            ("get_weather", {"city": "Berlin"}),
            ("get_weather", {"city": "Rome"}),
            say="Checking both.",
        ),
        tools(("to_fahrenheit", {"celsius": 21})),
        text("Berlin is cloudy, Rome is hot, and 21 °C is 69.8 °F."),
        text("Paris sunny, Berlin cloudy, Rome hot."),
    ]


USER_TURNS = ["What's the weather in Paris?", "And Berlin and Rome?", "Thanks! One line, please."]


def run_tool(call: ToolUseBlock) -> ToolResultBlock:
    if call.name == "get_weather":
        result = f"{call.input['city']}: sunny, 21C"
    else:
        result = str(call.input["celsius"] * 9 / 5 + 32)
    return ToolResultBlock(tool_use_id=call.id, content=result)


def scripted(replies: list[Reply]) -> Emulator:
    return Emulator(model=replies, models="any")


def adapters_for(emulator: Emulator, *stacks: str) -> dict[str, Adapter]:
    store = InMemoryToolIdStore()
    config = AdapterConfig(api_key="test-key", http_client=emulator.client())
    return {stack: build_adapter(stack, config, tool_id_store=store) for stack in stacks}


async def converse(order: list[Adapter], streaming: bool) -> list[Message]:
    users = iter(USER_TURNS)
    history = [Message.user(next(users))]
    for adapter in order:
        request = CanonicalRequest(
            model=f"{adapter.name}:test-model",
            session_id="conformance",
            system_prompt="Be brief.",
            messages=history,
            tools=TOOLS,
            max_output_tokens=512,
        )
        response = await (fold_stream(adapter, request) if streaming else adapter.complete(request))
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        calls = response.tool_calls
        if calls:
            history.append(Message.tool(*(run_tool(c) for c in calls)))
        elif (following := next(users, None)) is not None:
            history.append(Message.user(following))
    return history


async def fold_stream(adapter: Adapter, request: CanonicalRequest) -> CanonicalResponse:
    response: CanonicalResponse = await answer(adapter, request, streaming=True)
    return response


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
    assert history[-1].text() == "Paris sunny, Berlin cloudy, Rome hot."
    canonical_ids = [b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    assert len(canonical_ids) == 4 and all(i.startswith("tu_") for i in canonical_ids)


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


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_each_adapter_alone_produces_the_same_canonical_conversation(streaming: bool) -> None:
    histories = []
    for flavour in ("anthropic", "openai"):
        adapter = adapters_for(scripted(script()), flavour)[flavour]
        histories.append(_without_ids(await converse([adapter] * 6, streaming)))
    assert histories[0] == histories[1]


def _without_ids(history: list[Message]) -> list[dict[str, Any]]:
    """The conversation with canonical tool ids replaced by their order of appearance."""
    dumped = json.dumps([m.model_dump(mode="json") for m in history])
    ids = list(dict.fromkeys(_find_ids(dumped)))
    for n, tool_id in zip(itertools.count(), ids, strict=False):
        dumped = dumped.replace(tool_id, f"tool-{n}")
    return json.loads(dumped)  # type: ignore[no-any-return]


def _find_ids(text: str) -> list[str]:
    import re

    return re.findall(r"tu_[0-9A-Z]{26}", text)


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


@pytest.mark.anyio
async def test_a_vision_request_to_a_text_only_model_fails_before_any_network_call() -> None:
    """Through the registry: the model's declared capabilities (here
    overridden to text-only) are enforced before the adapter sends anything."""
    from metis import CapabilityError, Registry
    from metis.model import Base64ImageSource, ImageBlock

    sent: list[object] = []

    def handler(request: object) -> object:
        sent.append(request)
        raise AssertionError("no request may be sent")

    import httpx

    registry = Registry.from_dict(
        {
            "adapters": {"openai": {"type": "openai", "api_key_env": "OPENAI_API_KEY"}},
            "models": {
                "openai:gpt-text": {
                    "adapter": "openai",
                    "wire_name": "gpt-text",
                    "aliases": ["texty"],
                    "capabilities": {"supports_images": False},
                }
            },
        },
        environ={"OPENAI_API_KEY": "sk-test"},
        clients={"openai": httpx.AsyncClient(transport=httpx.MockTransport(handler))},  # type: ignore[arg-type]
    )
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    adapter, request = registry.request(
        "texty", messages=[Message.user("What is this?", image)], max_output_tokens=100
    )
    with pytest.raises(CapabilityError, match="images"):
        await adapter.complete(request)
    with pytest.raises(CapabilityError, match="images"):
        async for _ in adapter.stream(request):
            pass
    assert sent == []
    await registry.aclose()
