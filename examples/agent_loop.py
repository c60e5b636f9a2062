"""The agent loop in a session: tools answered until the model is done, every step watched,
the model swapped between steps, the conversation saved and taken up again elsewhere.

    python examples/agent_loop.py

Each provider is its real API when its key is set, otherwise the local emulator.
"""

from __future__ import annotations

import anyio

import metis
from metis.sessions import StepComplete, StepStart, ToolResultEvent
from metis.testing import MODELS, stand_in


@metis.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"Paris": "21°C, sunny", "Rome": "27°C, clear"}.get(city, "no data")


@metis.tool
async def get_forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    raise RuntimeError("the forecast service is down")  # the model reads it as an error


async def main() -> None:
    with stand_in("anthropic", "openai") as setup:
        adapters = {p: setup.adapter(p) for p in ("anthropic", "openai")}
        session = metis.Session(
            MODELS["anthropic"],
            adapters=adapters,
            system="You are a weather assistant.",
            tools=[get_weather, get_forecast],
        )

        def watch(event: object) -> None:
            if isinstance(event, StepStart):
                print(f"step {event.step} on {event.model}")
            elif isinstance(event, ToolResultEvent):
                print(f"    {event.call.name}({event.call.input}) -> {event.result.text}")
            elif isinstance(event, StepComplete) and event.step == 1:
                session.model = MODELS["openai"]  # the rest of the run goes to OpenAI

        result = await session.arun(
            "What's the weather in Paris and Rome?", on_event=watch, tool_timeout_seconds=10
        )
        print(f"{result.reason} after {result.steps} steps: {result.text}")
        print(f"tokens in {result.usage.input_tokens}, out {result.usage.output_tokens}")
        print(f"cost ${result.cost_usd:.6f}")

        saved = session.to_json()  # a database, a queue, another worker...
        again = metis.Session.from_json(saved, adapters=adapters, tools=[get_weather, get_forecast])
        reply = await again.asend("Thanks! Which of the two is warmer?")
        print(f"after a restore, {reply.provider}: {reply.text}")
        print(f"{len(again.messages)} messages in the history")
        for adapter in adapters.values():
            await adapter.aclose()


if __name__ == "__main__":
    anyio.run(main)
