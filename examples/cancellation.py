"""Cancel a streamed reply from another task.

    python examples/cancellation.py

One task streams a long reply; another calls adapter.cancel(request_id) after a few deltas.
The stream does not raise: it ends with message.complete, stop reason `cancelled`, and the
text that had arrived. Talks to Anthropic when ANTHROPIC_API_KEY is set, otherwise to the
local emulator; an emulator (this one, or one ANTHROPIC_BASE_URL names) is told by a header to
send its stream slowly.
"""

from __future__ import annotations

import os

import anyio

from metis import CanonicalRequest, Message, MessageComplete, TextBlock, TextDelta
from metis.testing import FAULT_HEADER, MODELS, stand_in


async def main() -> None:
    with stand_in("anthropic") as setup:
        # Paced at 50 ms an event but on Anthropic's own API: on this emulator, or on the one
        # ANTHROPIC_BASE_URL names (a reader's, started as README.md says), the reply would
        # have all arrived before the cancel.
        own_api = setup.is_real("anthropic") and not os.environ.get("ANTHROPIC_BASE_URL")
        slow = {} if own_api else {FAULT_HEADER: "slow=0.05"}
        adapter = setup.adapter("anthropic", extra_headers=slow)
        request = CanonicalRequest(
            model=MODELS["anthropic"],
            messages=[
                Message.user(
                    "Tell me a long story about a lighthouse keeper who collects the messages "
                    "in bottles that wash up on her island, and what she learns from them."
                )
            ],
            max_output_tokens=2000,
        )
        deltas = 0
        a_few_arrived = anyio.Event()
        final: MessageComplete | None = None

        async def consume() -> None:
            nonlocal deltas, final
            async for event in adapter.stream(request):
                if isinstance(event, TextDelta):
                    deltas += 1
                    if deltas == 5:
                        a_few_arrived.set()
                elif isinstance(event, MessageComplete):
                    final = event
            a_few_arrived.set()  # a reply too short to cancel: nothing left to wait for

        async def cancel_soon() -> None:
            await a_few_arrived.wait()
            cancelled = adapter.cancel(request.request_id)  # from any task, without awaiting
            print(f"cancel({request.request_id}) -> {cancelled}")

        async with adapter, anyio.create_task_group() as tasks:
            tasks.start_soon(consume)
            tasks.start_soon(cancel_soon)

    assert final is not None
    partial = "".join(b.text for b in final.final_content if isinstance(b, TextBlock))
    print(f"partial text after {deltas} deltas: {partial!r}")
    print(f"stop reason: {final.stop_reason.kind.value}")
    print(f"usage so far: {final.usage.input_tokens} in, {final.usage.output_tokens} out")


if __name__ == "__main__":
    anyio.run(main)
