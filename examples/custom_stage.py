"""Insert your own stage into a provider's pipeline.

    python examples/custom_stage.py

Two small stages: one masks anything that looks like a card number in the reply as it
streams, one times the first token. Both use the same Stage interface as the built-ins, and
the built-in invariant check (outermost) still checks what comes out of them. Talks to
Anthropic when ANTHROPIC_API_KEY is set, otherwise to the local emulator.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

from metis import (
    Adapter,
    CanonicalRequest,
    Message,
    MessageComplete,
    StreamEvent,
    TextBlock,
    TextDelta,
)
from metis.pipeline import Call, Inner, Stage
from metis.testing import stand_in

CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")


class MaskCards(Stage[Any, Any, StreamEvent, StreamEvent]):
    """Masks card numbers in text deltas and in the final content, consistently.

    A number can arrive split across deltas, so the digits (and spaces and dashes) at the end
    of a delta wait for the next one before they are masked and sent on. Masking each delta
    on its own would not match the final content, and the invariants stage would say so.
    Events from inside are never changed: a masked one is a new event.
    """

    name = "mask_cards"

    async def __call__(
        self, request: Any, call: Call, inner: Inner[Any, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        held: TextDelta | None = None  # text that may be the start of a card number
        async for event in inner(request, call):
            if isinstance(event, TextDelta):
                index, text = event.content_block_index, event.text
                if held is not None and held.content_block_index == index:
                    text = held.text + text
                elif held is not None:
                    yield _masked(held)
                ready, tail = _split_tail(text)
                held = TextDelta(index, tail) if tail else None
                if ready:
                    yield _masked(TextDelta(index, ready))
                continue
            if held is not None:
                yield _masked(held)
                held = None
            if isinstance(event, MessageComplete):
                masked = [
                    TextBlock(text=CARD.sub("[card]", b.text)) if isinstance(b, TextBlock) else b
                    for b in event.final_content
                ]
                event = dataclasses.replace(event, final_content=masked)
            yield event


def _split_tail(text: str) -> tuple[str, str]:
    """``text`` cut before its trailing run of digits, spaces and dashes."""
    cut = len(text)
    while cut > 0 and (text[cut - 1].isdigit() or text[cut - 1] in " -"):
        cut -= 1
    return text[:cut], text[cut:]


def _masked(delta: TextDelta) -> TextDelta:
    return TextDelta(delta.content_block_index, CARD.sub("[card]", delta.text))


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
    with stand_in("anthropic") as where:
        await converse(where.adapter("anthropic"))


async def converse(adapter: Adapter) -> None:
    adapter.pipeline.insert_after("invariants", MaskCards())
    adapter.pipeline.insert_after("mask_cards", TimeToFirstToken())
    print(" -> ".join(adapter.pipeline.names()), "\n")
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        session_id="custom-stage",
        system_prompt="You are a helpful assistant.",
        messages=[Message.user("Please repeat this back to me: my card is 4111 1111 1111 1111.")],
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
