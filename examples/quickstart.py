"""The smallest complete program: one question, one answer.

    python examples/quickstart.py

Talks to Anthropic when ANTHROPIC_API_KEY is set, otherwise to a local emulator.
"""

from __future__ import annotations

import anyio

from metis import CanonicalRequest, Message
from metis.testing import MODELS, stand_in


async def main() -> None:
    with stand_in("anthropic") as setup:
        async with setup.adapter("anthropic") as adapter:
            request = CanonicalRequest(
                model=MODELS["anthropic"],
                messages=[Message.user("In one sentence, what is a canonical format?")],
                max_output_tokens=200,
            )
            response = await adapter.complete(request)
    print(response.text)
    stop = response.stop_reason
    print(f"stop reason: {stop.kind.value} (the provider said {stop.raw!r})")
    usage = response.usage
    print(
        f"usage: {usage.input_tokens} in, {usage.output_tokens} out, "
        f"{usage.cached_input_tokens} cache read, {usage.cache_creation_input_tokens} cache write"
    )


if __name__ == "__main__":
    anyio.run(main)
