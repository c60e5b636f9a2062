"""Insert your own stage into a provider's pipeline.

    python examples/custom_stage.py

Two small stages: one masks anything that looks like a card number in the reply as it
streams, one times the first token. Both use the same Stage interface as the built-ins, and
the built-in invariant check (outermost) still checks what comes out of them. Runs offline on
the recorded conversation unless ANTHROPIC_API_KEY is set.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from stream_with_tools import WEATHER, config_for

from metis import (
    Call,
    CanonicalRequest,
    Message,
    MessageComplete,
    Stage,
    StreamEvent,
    TextBlock,
    TextDelta,
    build_adapter,
)
from metis.pipeline.stage import Inner

CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")


class MaskCards(Stage[Any, Any, StreamEvent, StreamEvent]):
    """Masks card numbers in text deltas and in the final content, consistently."""

    name = "mask_cards"

    async def __call__(
        self, request: Any, call: Call, inner: Inner[Any, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        async for event in inner(request, call):
            if isinstance(event, TextDelta):
                event.text = CARD.sub("[card]", event.text)
            elif isinstance(event, MessageComplete):
                event.final_content = [
                    TextBlock(text=CARD.sub("[card]", b.text)) if isinstance(b, TextBlock) else b
                    for b in event.final_content
                ]
            yield event


class TimeToFirstToken(Stage[Any, Any, StreamEvent, StreamEvent]):
    name = "time_to_first_token"

    async def __call__(
        self, request: Any, call: Call, inner: Inner[Any, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        started = time.perf_counter()
        first = True
        async for event in inner(request, call):
            if first and isinstance(event, TextDelta):
                print(f"[first token after {(time.perf_counter() - started) * 1000:.1f} ms]")
                first = False
            yield event


async def main() -> None:
    adapter = build_adapter("anthropic", config_for("anthropic"))
    adapter.pipeline.insert_after("invariants", MaskCards())
    adapter.pipeline.insert_after("mask_cards", TimeToFirstToken())
    print(" -> ".join(adapter.pipeline.names()), "\n")
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        session_id="custom-stage",
        system_prompt="You are a weather assistant.",
        messages=[Message.user("What's the weather in Paris and in Rome, in Celsius?")],
        tools=[WEATHER],
        max_output_tokens=1024,
        temperature=0.2,
    )
    async with adapter:
        async for event in adapter.stream(request):
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
    print()


if __name__ == "__main__":
    anyio.run(main)
