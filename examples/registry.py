"""A models.yaml: aliases, an adapter without its key, and a per-model capability override.

    python examples/registry.py

The registry maps model names and aliases to adapters. An adapter whose key is missing stays
listed as not_configured, and routing to it says which variable to set. A model's
`capabilities` override what its provider's stack declares, and metis refuses, before sending
anything, a request that model cannot serve. Anthropic is its real API when
ANTHROPIC_API_KEY is set, otherwise the local emulator.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio

from metis import CapabilityError, Message, NotConfiguredError, Registry, ToolDefinition
from metis.testing import stand_in

MODELS_YAML = """\
adapters:
  anthropic:
    type: anthropic                  # a built-in stack (or a path to a stack file)
    api_key_env: ANTHROPIC_API_KEY
    base_url: {anthropic_url}
  mistral:
    type: mistral
    api_key_env: MISTRAL_API_KEY
models:
  anthropic:claude-sonnet-4-5:
    adapter: anthropic
    tier: balanced
    aliases: [sonnet, balanced]
  anthropic:claude-haiku-4-5:
    adapter: anthropic
    tier: fast
    aliases: [haiku, fast]
    capabilities:                    # how we deploy this one: no tools, short answers
      supports_tools: false
      max_output_tokens: 1024
  mistral:mistral-large-latest:
    adapter: mistral
    aliases: [large]
"""
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


async def main() -> None:
    with stand_in("anthropic") as setup, tempfile.TemporaryDirectory() as folder:
        environ = dict(os.environ)
        url = "null"  # the stack's own endpoint
        if not setup.is_real("anthropic"):
            assert setup.emulator is not None
            url = setup.emulator.base_url("anthropic")
            environ["ANTHROPIC_API_KEY"] = "emulator"
        path = Path(folder) / "models.yaml"
        path.write_text(MODELS_YAML.format(anthropic_url=url))

        async with Registry.load(path, environ=environ) as registry:
            for status in registry.status():
                why = f" ({status.reason})" if status.reason else ""
                print(f"adapter {status.name}: {status.status}{why}")

            route = registry.resolve("sonnet")
            print(f"'sonnet' -> {route.model} (adapter {route.adapter_name}, tier {route.tier})")
            question = [Message.user("What's the weather in Oslo?")]
            adapter, request = registry.request(
                "sonnet", messages=question, tools=[WEATHER], max_output_tokens=200
            )
            response = await adapter.complete(request)
            for call in response.tool_calls:
                print(f"    {route.model} called {call.name}({call.input})")

            try:
                registry.resolve("large")
                print("'large' is configured here (MISTRAL_API_KEY is set)")
            except NotConfiguredError as error:
                print(f"'large' -> NotConfiguredError: {error}")

            fast = registry.resolve("fast")
            print(f"'fast' -> {fast.model}, supports_tools={fast.capabilities.supports_tools}")
            adapter, request = registry.request(
                "fast", messages=question, tools=[WEATHER], max_output_tokens=200
            )
            try:
                await adapter.complete(request)
            except CapabilityError as error:  # raised before anything was sent
                print(f"    CapabilityError: {error}")
            if setup.emulator is not None:
                print(f"    requests the emulator received in all: {setup.emulator.stats.requests}")


if __name__ == "__main__":
    anyio.run(main)
