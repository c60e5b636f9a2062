"""Stream a reply that calls a tool, run the tool, send the result back, stream the answer.

    python examples/stream_with_tools.py [anthropic|openai]

With ANTHROPIC_API_KEY / OPENAI_API_KEY set, it talks to the real API. Without a key it
replays the committed cassette of the same conversation, so it runs offline on a fresh clone
(the cassette also checks that every request metis sends is byte-for-byte the recorded one).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import httpx

from metis import (
    AdapterConfig,
    CanonicalRequest,
    Message,
    MessageComplete,
    TextDelta,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseStart,
    build_adapter,
)
from metis.testing.cassette import ReplayTransport

MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4o"}
KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
CASSETTES = Path(__file__).resolve().parents[1] / "cassettes"

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)


def get_weather(city: str, unit: str = "celsius") -> str:
    """The tool, run locally. (A real one would call a weather service.)"""
    return {"Paris": "Paris: 21°C, sunny", "Rome": "Rome: 27°C, clear"}.get(city, f"{city}: ?")


def config_for(provider: str) -> AdapterConfig:
    if os.environ.get(KEYS[provider]):
        return AdapterConfig()  # the stack reads the key from the environment
    print(f"({KEYS[provider]} is not set: replaying the recorded conversation)\n")
    replay = ReplayTransport(CASSETTES / provider / "weather_conversation.yaml")
    return AdapterConfig(api_key="offline", http_client=httpx.AsyncClient(transport=replay))


async def main(provider: str) -> None:
    adapter = build_adapter(provider, config_for(provider))
    history = [Message.user("What's the weather in Paris and in Rome, in Celsius?")]
    async with adapter:
        while True:
            request = CanonicalRequest(
                model=MODELS[provider],
                session_id="example",
                system_prompt="You are a weather assistant.",
                messages=history,
                tools=[WEATHER],
                max_output_tokens=1024,
                temperature=0.2,
            )
            async for event in adapter.stream(request):
                if isinstance(event, TextDelta):
                    print(event.text, end="", flush=True)
                elif isinstance(event, ToolUseStart):
                    print(f"\n  -> {event.tool_name}", end="", flush=True)
                elif isinstance(event, ToolUseEnd):
                    print(f"({event.final_input})", end="", flush=True)
                elif isinstance(event, MessageComplete):
                    final = event
            print(f"\n[{final.stop_reason.kind.value}; {final.usage.output_tokens} tokens out]")
            history.append(Message.assistant(*final.final_content))
            calls = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
            if not calls:
                break
            results = [
                ToolResultBlock(tool_use_id=c.id, content=get_weather(**c.input)) for c in calls
            ]
            history.append(Message.tool(*results))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "anthropic")
