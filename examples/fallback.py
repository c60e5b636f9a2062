"""Fallback across providers: when the first model is overloaded, another provider's model
takes the turn, tool calls from the first one and all.

    python examples/fallback.py

Runs offline: every provider is the local emulator, which is told to answer Anthropic with
"overloaded" at the moment the example wants a failure. The route is Claude, then GPT-4o,
then Gemini; each turn prints which model served it and why the others did not.
"""

from __future__ import annotations

import anyio

from metis import AdapterConfig, InMemoryToolIdStore, Message, ToolResultBlock, build_adapter
from metis.model import CanonicalRequest, ToolDefinition
from metis.routing import Router
from metis.telemetry import RouteDecided, TelemetryEvent
from metis.testing import Emulator

ROUTE = ["anthropic:claude-sonnet-4-5", "openai:gpt-4o", "gemini:gemini-2.5-flash"]
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
# (what the user says, or None to answer tool calls; the provider to overload first)
TURNS = [
    ("What's the weather in Paris?", None),
    (None, "anthropic"),  # Claude made the tool call; it is overloaded when the result is due
    ("And the weather in Rome?", None),  # Claude is cooling down now: skipped
    (None, None),
]


class Decisions:
    """A telemetry sink that keeps the router's decisions."""

    def __init__(self) -> None:
        self.last: RouteDecided | None = None

    def emit(self, event: TelemetryEvent) -> None:
        if isinstance(event, RouteDecided):
            self.last = event


def get_weather(city: str) -> str:
    return {"Paris": "21°C, sunny", "Rome": "27°C, clear"}.get(city, "no data")


async def main() -> None:
    decisions = Decisions()
    with Emulator() as emulator:
        print(
            f"backends: emulator at {emulator.url} for {', '.join(p.split(':')[0] for p in ROUTE)}"
        )
        tool_ids = InMemoryToolIdStore()
        adapters = {
            name.split(":")[0]: build_adapter(
                name.split(":")[0],
                AdapterConfig(api_key="emulated", base_url=emulator.url),
                tool_id_store=tool_ids,
            )
            for name in ROUTE
        }
        router = Router(ROUTE, adapters=adapters, max_retries=0, telemetry=decisions)
        history: list[Message] = []
        for number, (user_says, overloaded) in enumerate(TURNS, 1):
            if user_says is not None:
                history.append(Message.user(user_says))
            if overloaded is not None:
                emulator.push_fault("overloaded", provider=overloaded)
            request = CanonicalRequest(
                model="route:weather",
                messages=history,
                tools=[WEATHER],
                max_output_tokens=1024,
                session_id="fallback-example",
            )
            reply = await router.complete(request)
            history.append(reply.message)
            report(number, decisions.last)
            for call in reply.tool_calls:
                print(f"    -> {call.name}({call.input}) id={call.id}")
            if reply.tool_calls:
                results = [
                    ToolResultBlock(tool_use_id=c.id, content=get_weather(**c.input))
                    for c in reply.tool_calls
                ]
                history.append(Message.tool(*results))
            else:
                print(f"    {reply.text}")
        await router.aclose()
        for adapter in adapters.values():
            await adapter.aclose()


def report(number: int, decision: RouteDecided | None) -> None:
    assert decision is not None
    print(f"[{number}] served by {decision.served_by}")
    for model, outcome, reason in decision.steps:
        if outcome != "served":
            print(f"    {model} {outcome}: {reason}")


if __name__ == "__main__":
    anyio.run(main)
