"""One conversation with a tool across every family and every platform, on the emulator.

The emulator refuses, as each real API does, what it would refuse; so each turn proves the
next provider, on whatever platform, accepts the history all the others produced. Signed
reasoning made on one platform never goes to another, even for the same model.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    Message,
    ThinkingBlock,
    ThinkingConfig,
    ToolResultBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator

from . import test_cloud_conformance as cloud
from . import test_conformance_all as families

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

ROTATION = [
    "anthropic",
    "bedrock",
    "vertex",
    "azure",
    "openai_responses",
    "bedrock_anthropic",
    "gemini",
    "vertex_anthropic",
    "azure_responses",
    "openai",
    "groq",
    "ollama",
]
MODELS = {**families.MODELS, **cloud.MODELS}


def adapter(stack: str, emulator: Emulator, store: InMemoryToolIdStore) -> Adapter:
    module: Any = cloud if stack in cloud.MODELS else families
    built: Adapter = module.adapter(stack, emulator)
    built.tool_id_store = store  # one session, moving between every platform
    return built


def ask(stack: str, history: list[Message], **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS[stack],
        session_id="everywhere",
        messages=history,
        tools=[families.WEATHER],
        max_output_tokens=2048,
        **fields,
    )


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


@pytest.mark.anyio
@pytest.mark.parametrize("platform", ["bedrock_anthropic", "vertex_anthropic"])
async def test_reasoning_signed_on_one_platform_is_not_sent_to_another(
    emulator: Emulator, platform: str
) -> None:
    store = InMemoryToolIdStore()
    home = adapter("anthropic", emulator, store)
    history = [Message.user("Think it over: what's the weather in Paris?")]
    thinking = ThinkingConfig(budget_tokens=1024)
    first = await home.complete(ask("anthropic", history, thinking=thinking))
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
