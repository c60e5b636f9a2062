"""Sessions against the emulator: an adapter per stack (every platform's rules), one tool-id
store for the conversation, and the tools the agent-loop tests call."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio

import metis
from metis.adapter import Adapter
from metis.model import ThinkingConfig
from metis.pipeline.stores import InMemoryToolIdStore
from metis.sessions import Session
from metis.testing.emulator import Emulator

from . import stack_table as platforms

MODELS: dict[str, str] = platforms.MODELS
STACKS: list[str] = platforms.ROTATION
"""Every family and platform whose rules the emulator keeps."""
FAMILIES = ["anthropic", "openai", "openai_responses", "gemini", "ollama", "bedrock"]
"""One stack of each wire family: Messages, Chat, Responses, Gemini, Ollama, Converse."""
THINKING = ThinkingConfig(budget_tokens=2048)
DEADLINE = 60.0


def emulated(
    emulator: Emulator,
    store: InMemoryToolIdStore | None = None,
    stacks: Iterable[str] = STACKS,
) -> dict[str, Adapter]:
    """An adapter for every stack (or for ``stacks``, those a test calls: each adapter built
    costs a few milliseconds), all keeping tool ids in ``store``."""
    store = store or InMemoryToolIdStore()
    return {stack: platforms.adapter(stack, emulator, store) for stack in stacks}


def thinking_for(session: Session, stack: str) -> dict[str, Any]:
    """``thinking=...`` where the stack's model can think, else nothing."""
    adapter = session.adapters[stack]
    caps = adapter.capabilities_for(adapter.wire_model(MODELS[stack]))
    return {"thinking": THINKING} if caps.supports_thinking else {}


async def close_all(adapters: dict[str, Adapter]) -> None:
    for adapter in adapters.values():
        await adapter.aclose()


@metis.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18 C and sunny in {city}"


class Gate:
    """A tool that waits until released, saying when it has started."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.calls = 0

    def tool(self) -> metis.Tool[..., Any]:
        @metis.tool
        async def get_forecast(city: str) -> str:
            """Tomorrow's forecast for a city."""
            self.calls += 1
            self.started.set()
            await self.release.wait()
            return f"rain in {city}"

        return get_forecast
