"""``metis keys --config FILE [--reset NAME]``: the gateway's keys (``gateway.keys``), each
one's spend in its budget period and its budget, read from the Redis the gateways share
(``gateway.redis_url``); ``--reset NAME`` sets that key's spend of its period back to 0
(docs/gateway.md). Without ``redis_url`` each gateway process keeps its keys' spend in its own
memory, which nothing outside it can reach: refused, saying so."""

from __future__ import annotations

import argparse
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio

from metis.cli.output import CliError, Output
from metis.core.suggest import did_you_mean


def run(args: argparse.Namespace) -> int:
    from metis.gateway.config import read_settings

    path = str(Path(args.config).expanduser())
    settings = read_settings(path)
    if not settings.keys:
        raise CliError(f"{path} has no gateway.keys: there is no key's spend to show")
    if settings.redis_url is None:
        raise CliError(
            f"{path} has no gateway.redis_url: each gateway process keeps its keys' spend in "
            "its own memory, which cannot be read or reset from outside it (GET /metrics says "
            "a process's; a restart forgets it); name a Redis in gateway.redis_url to share it "
            "between the gateways and reach it here"
        )
    names = [spec.name for spec in settings.keys]
    if args.reset is not None and args.reset not in names:
        raise CliError(
            f"{path}: gateway.keys has no key named {args.reset!r}; its keys: "
            + ", ".join(names)
            + did_you_mean(args.reset, names)
        )
    return anyio.run(_shown, settings, args.reset, Output())


async def _shown(settings: Any, reset: str | None, out: Output) -> int:
    from metis.gateway.keys import KeyState
    from metis.gateway.keys_redis import RedisLedger
    from metis.redis.target import connect, parse_redis_url

    states = [KeyState(spec) for spec in settings.keys]
    async with connect(parse_redis_url(settings.redis_url), max_connections=2, seconds=5.0) as c:
        ledger = RedisLedger(c)
        if reset is not None:
            state = next(state for state in states if state.spec.name == reset)
            spent = await ledger.spent(state)
            await ledger.reset(state)
            label = (await ledger.period(state)).label
            of = f" of {label}" if label else ""
            out.line(f"key {reset!r}: its spend{of} ({spent:f} USD) is reset to 0")
            return 0
        rows = [
            _row(state, await ledger.period(state), await ledger.spent(state)) for state in states
        ]
    out.table(["key", "period", "spent USD", "budget USD", "renews"], rows, right=(2, 3))
    return 0


def _row(state: Any, period: Any, spent: Decimal) -> list[str]:
    spec = state.spec
    budget = "-" if spec.budget_usd is None else format(spec.budget_usd, "f")
    renews = "never" if period.ends is None else period.ends.strftime("%Y-%m-%dT%H:%M:%SZ")
    return [spec.name, period.label or "none", format(spent, "f"), budget, renews]
