"""``metis demo``'s table: one row per turn, what it cost and what it carried."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from metis.cli.models import Target
from metis.cli.output import Output, duration, usd


@dataclass(slots=True)
class Row:
    turn: int
    target: Target
    stop: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: Decimal | None = None
    estimated: bool = False
    latency_ms: float = 0.0
    ids_mapped: int = 0
    """Canonical tool ids this turn's request carried, each sent as the provider's own."""
    dropped: int = 0
    """Blocks the provider could not take (another model's signed reasoning, ...)."""
    retries: int = 0


def print_table(out: Output, rows: list[Row]) -> None:
    body = [
        [
            str(r.turn),
            r.target.provider,
            r.target.model.partition(":")[2] or r.target.model,
            r.stop,
            "-" if r.tokens_in is None else str(r.tokens_in),
            "-" if r.tokens_out is None else str(r.tokens_out),
            usd(r.cost, estimated=r.estimated),
            duration(r.latency_ms) if r.tokens_in is not None else "-",
            str(r.ids_mapped),
            str(r.dropped),
            str(r.retries),
        ]
        for r in rows
    ]
    out.table(
        ["turn", "provider", "model", "stop", "in", "out", "cost", "latency", "ids", "dropped",
         "retries"],
        body,
        right=(0, 4, 5, 6, 7, 8, 9, 10),
    )  # fmt: skip
    providers = len({r.target.provider for r in rows if r.tokens_in is not None})
    tokens_in = sum(r.tokens_in or 0 for r in rows)
    tokens_out = sum(r.tokens_out or 0 for r in rows)
    total = sum((r.cost for r in rows if r.cost is not None), Decimal(0))
    out.line(
        f"{_count(len(rows), 'turn')}, {_count(providers, 'provider')}, {tokens_in} tokens in, "
        f"{tokens_out} out, "
        f"{usd(total)} (prices: the model catalog, $0 on a local server; -: not priced)",
        "dim",
    )
    out.line(
        "ids: tool ids the turn sent in the provider's own form; dropped: blocks that provider "
        "could not take (warned once per session); retries: attempts after the first",
        "dim",
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
