"""One conversation, five providers: each turn goes to the next one.

    python examples/mid_session_swap.py

The history is a list of canonical Messages, so any provider can take the next turn: a tool
call Anthropic made is answered by OpenAI, one Gemini made by the Responses API. Tool ids stay
canonical (tu_...) in the history; each provider is sent ids in its own format. Each provider
is its real API when its key is set (OLLAMA_HOST for Ollama), otherwise the local emulator.
"""

from __future__ import annotations

import re

import anyio

from metis import (
    CanonicalRequest,
    InMemoryToolIdStore,
    Message,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    build_adapter,
)
from metis.testing import MODELS, stand_in

ROTATION = ["anthropic", "openai", "gemini", "openai_responses", "ollama"]
USER_SAYS = [
    "What's the weather in Paris?",
    "And what's the weather in Rome?",
    "Thanks! Which of the two is warmer?",
]
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def get_weather(city: str) -> str:
    """The tool, run locally."""
    return {"Paris": "21°C, sunny", "Rome": "27°C, clear"}.get(city, "no data")


async def main() -> None:
    # The per-session map of canonical <-> provider tool ids, shared by all five adapters.
    # (Adapters share a process-wide one by default; a shared store spans worker processes.)
    tool_ids = InMemoryToolIdStore()
    history: list[Message] = []
    user_says = iter(USER_SAYS)
    with stand_in(*ROTATION) as setup:
        adapters = {p: build_adapter(p, setup.config(p), tool_id_store=tool_ids) for p in ROTATION}
        for turn, provider in enumerate(ROTATION, 1):
            if not history or history[-1].role == "assistant":  # else: tool results to answer
                history.append(Message.user(next(user_says)))
                print(f"\nuser: {history[-1].text}")
            request = CanonicalRequest(
                model=MODELS[provider],
                session_id="swap-demo",
                system_prompt="You are a weather assistant.",
                messages=history,
                tools=[WEATHER],
                max_output_tokens=512,
            )
            response = await adapters[provider].complete(request)
            history.append(Message.assistant(*response.content))
            print(f"[{turn}] {provider}: {response.text or '(no text)'}")
            calls = response.tool_calls
            for call in calls:
                print(f"    -> {call.name}({call.input}) id={call.id}")
            if calls:
                results = [
                    ToolResultBlock(tool_use_id=c.id, content=get_weather(**c.input)) for c in calls
                ]
                history.append(Message.tool(*results))
                print(f"    <- {', '.join(r.text for r in results)}")
        for adapter in adapters.values():
            await adapter.aclose()

        # The history is still one valid canonical conversation: every call answered, tu_ ids.
        uses = [b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)]
        answered = [
            b.tool_use_id for m in history for b in m.content if isinstance(b, ToolResultBlock)
        ]
        assert uses == answered and all(i.startswith("tu_") for i in uses)
        print(f"\nhistory: {len(history)} messages; tool ids {', '.join(uses)}, all answered")
        # The provider that issued an id gets it back; the others get one derived from tu_...
        for provider in ROTATION:
            issued = await tool_ids.provider_ids("swap-demo", provider, uses)
            for canonical, own in issued.items():
                print(f"{canonical} was issued by {provider} as {own}")
        if setup.emulator is not None:
            print("the first call's id, as each later request carried it:")
            for record in setup.emulator.requests:
                sent = re.search(r'"((?:toolu|call)_[0-9A-Za-z]{16,})"', record.body.decode())
                if sent:
                    print(f"    to {record.provider}: {sent.group(1)}")


if __name__ == "__main__":
    anyio.run(main)
