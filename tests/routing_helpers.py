"""Adapters for routing tests: every provider family against the emulator, (retries unslept with the
``no_backoff`` fixture of tests/conftest.py)."""

from __future__ import annotations

from typing import Any

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.pipeline.stores import InMemoryToolIdStore, ToolIdStore
from metis.testing.emulator import Emulator

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
}
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def emulated(
    emulator: Emulator, store: ToolIdStore | None = None, **config: Any
) -> dict[str, Adapter]:
    """One adapter per provider family, sharing a tool-id store, their retries not sleeping."""
    store = store or InMemoryToolIdStore()
    built = {}
    for provider in MODELS:
        settings = AdapterConfig(api_key="test-key", base_url=emulator.url, **config)
        built[provider] = build_adapter(provider, settings, tool_id_store=store)
    return built


def ask(text: str = "What's the weather in Paris?", **fields: Any) -> CanonicalRequest:
    fields.setdefault("tools", [WEATHER])
    fields.setdefault("max_output_tokens", 512)
    return CanonicalRequest(model="route:test", messages=[Message.user(text)], **fields)


def served_providers(emulator: Emulator) -> list[str | None]:
    """Which emulated provider answered each request, in order, with its status."""
    return [r.provider for r in emulator.requests]
