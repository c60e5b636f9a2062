"""What prompt caching saves in an agent loop: ten turns of tool calls against Claude, with
metis's default cache policy and with it off, offline against the metis emulator (which
caches as Anthropic does: docs/caching.md, docs/emulator.md).

    python examples/cache_loop.py
"""

from __future__ import annotations

from decimal import Decimal

import anyio

from metis import AdapterConfig, CachePolicy, CanonicalRequest, Message, build_adapter
from metis.cost import cost_of
from metis.model import Role, ToolDefinition, ToolResultBlock
from metis.testing.emulator import Emulator, Script, text, tools

MODEL = "anthropic:claude-sonnet-4-5"
SYSTEM = "You are a careful weather assistant. Answer briefly and cite the tool. " * 120
CITIES = ["Paris", "Rome", "Oslo", "Tokyo", "Lima", "Cairo", "Quito", "Perth", "Baku"]
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


async def loop(policy: CachePolicy | None) -> Decimal:
    script = Script([*(tools(("get_weather", {"city": c})) for c in CITIES), text("Done.")])
    emulator = Emulator(model=script, models="any")
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k", http_client=emulator.client()))
    history = [Message.user("The weather in nine cities, one at a time, please.")]
    total = Decimal(0)
    for turn in range(1, 11):
        request = CanonicalRequest(
            model=MODEL,
            system_prompt=SYSTEM,
            tools=[WEATHER],
            messages=history,
            max_output_tokens=512,
            cache=policy,
        )
        reply = await adapter.complete(request)
        usage, cost = reply.usage, cost_of(MODEL, reply.usage).usd
        total += cost
        print(
            f"  turn {turn:2}: {usage.total_input_tokens:5} in, {usage.cached_input_tokens:5} "
            f"read from the cache, {usage.cache_creation_input_tokens:4} written  ${cost:.5f}"
        )
        history.append(Message(role=Role.ASSISTANT, content=reply.content))
        results = [
            ToolResultBlock(tool_use_id=call.id, content=f"{call.input['city']}: sunny, 21C")
            for call in reply.tool_calls
        ]
        if results:
            history.append(Message.tool(*results))
    await adapter.aclose()
    return total


async def main() -> None:
    print("with the default cache policy:")
    cached = await loop(None)
    print("with caching off (CachePolicy.off()):")
    uncached = await loop(CachePolicy.off())
    saved = 100 * (1 - cached / uncached)
    print(f"ten turns: ${cached:.4f} cached, ${uncached:.4f} not: {saved:.0f}% saved")


if __name__ == "__main__":
    anyio.run(main)
