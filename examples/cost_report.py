"""What calls cost: token usage per call, priced from metis's table, then repriced.

    python examples/cost_report.py

Adapters report tokens only; the model catalog's prices turn them into USD (cost_of). Stored usage
can be priced again under another table (a new price list, a negotiated discount) with
PriceTable.reprice. The long system prompt is cached by the provider after the first call,
which shows in the cache columns. Each provider is its real API when its key is set,
otherwise the local emulator.
"""

from __future__ import annotations

import anyio

from metis import CanonicalRequest, Message, PriceTable, TokenUsage, cost_of
from metis.cost import default_price_table
from metis.testing import MODELS, stand_in

# Long enough (over 1024 tokens) for the providers to cache it.
SYSTEM = "You answer questions about the solar system.\n" + "\n".join(
    f"Fact {i}: planet number {i % 8 + 1} is listed in the reference tables with its orbit, "
    f"mass and radius, and every answer cites the table row it used."
    for i in range(1, 61)
)
QUESTIONS = ["How far is Mars?", "How heavy is Jupiter?", "How big is Saturn?"]


async def main() -> None:
    stored: list[tuple[str, TokenUsage]] = []  # what an application would keep per call
    with stand_in("anthropic", "openai") as setup:
        for provider in ("anthropic", "openai"):
            async with setup.adapter(provider) as adapter:
                for question in QUESTIONS:
                    response = await adapter.complete(
                        CanonicalRequest(
                            model=MODELS[provider],
                            system_prompt=SYSTEM,
                            messages=[Message.user(question)],
                            max_output_tokens=300,
                        )
                    )
                    stored.append((response.model, response.usage))

    table = default_price_table()
    # The models used, with every rate halved: a discount agreed after the calls were made.
    used = {table.model_id(model): table.price(model) for model, _ in stored}
    discounted = PriceTable.from_dict(
        {
            "pricing_version": "2026-12-01-discount",
            "models": {
                model: {
                    "input": price.input / 2,
                    "output": price.output / 2,
                    "cached_input": price.cached_input_rate / 2,
                    "cache_creation": price.cache_creation_rate / 2,
                }
                for model, price in used.items()
            },
        },
        "discount",
    )
    repriced = discounted.reprice(stored)

    print(
        f"\n{'model':28} {'in':>5} {'out':>4} {'cache r':>7} {'cache w':>7} "
        f"{'USD ' + table.pricing_version:>20} {'USD ' + discounted.pricing_version:>28}"
    )
    for (model, usage), new in zip(stored, repriced, strict=True):
        old = cost_of(model, usage)
        print(
            f"{model:28} {usage.input_tokens:5} {usage.output_tokens:4} "
            f"{usage.cached_input_tokens:7} {usage.cache_creation_input_tokens:7} "
            f"{old.usd:20} {new.usd:28}"
        )
    total_old = sum(cost_of(m, u).usd for m, u in stored)
    total_new = sum(c.usd for c in repriced)
    print(f"{'total':58} {total_old:20} {total_new:28}")


if __name__ == "__main__":
    anyio.run(main)
