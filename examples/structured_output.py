"""Ask for JSON that fits a schema, and parse it into a pydantic model.

    python examples/structured_output.py

The same CanonicalRequest.output_schema becomes Anthropic's output_config and OpenAI's
response_format (strict); the reply is text holding the JSON. Each provider is its real API
when its key is set, otherwise the local emulator.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from metis import CanonicalRequest, Message
from metis.testing import MODELS, stand_in


class City(BaseModel):
    name: str
    country: str
    population: int


async def main() -> None:
    question = "Give me facts about Lyon, France: population 522250."
    with stand_in("anthropic", "openai") as setup:
        for provider in ("anthropic", "openai"):
            async with setup.adapter(provider) as adapter:
                response = await adapter.complete(
                    CanonicalRequest(
                        model=MODELS[provider],
                        messages=[Message.user(question)],
                        output_schema=City.model_json_schema(),
                        max_output_tokens=300,
                    )
                )
            city = City.model_validate_json(response.text)
            print(f"{provider}: {response.text}")
            print(f"    parsed: {city!r}")


if __name__ == "__main__":
    anyio.run(main)
