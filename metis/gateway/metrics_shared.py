"""``GET /metrics`` across the workers of one ``metis serve --workers N`` (docs/gateway.md
"Replicas"): each worker writes its counts to a file of its own in a directory they share,
every second and when it is scraped; a scrape answers the sum of every file. A worker that
has stopped keeps its file, so the sums only grow, as counters must."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio

from metis.core.ids import new_ulid
from metis.gateway.metrics import Metrics

WRITE_SECONDS = 1.0


def snapshot(metrics: Metrics) -> dict[str, Any]:
    return {
        "requests": [[a, m, s, n] for (a, m, s), n in metrics.requests.items()],
        "errors": [[a, k, n] for (a, k), n in metrics.errors.items()],
        "tokens": [[m, d, n] for (m, d), n in metrics.tokens.items()],
        "cost": [[m, str(usd)] for m, usd in metrics.cost.items()],
        "durations": metrics.durations,
        "duration_sum": metrics.duration_sum,
        "duration_count": dict(metrics.duration_count),
    }


def absorb(into: Metrics, found: dict[str, Any]) -> None:
    """Add a worker's counts (a :func:`snapshot`) to ``into``."""
    for a, m, s, n in found.get("requests", ()):
        into.requests[(a, m, int(s))] += n
    for a, k, n in found.get("errors", ()):
        into.errors[(a, k)] += n
    for m, d, n in found.get("tokens", ()):
        into.tokens[(m, d)] += n
    for m, usd in found.get("cost", ()):
        into.cost[m] = into.cost.get(m, Decimal(0)) + Decimal(usd)
    for api, counts in found.get("durations", {}).items():
        mine = into.durations.setdefault(api, [0] * len(counts))
        into.durations[api] = [x + y for x, y in zip(mine, counts, strict=True)]
    for api, seconds in found.get("duration_sum", {}).items():
        into.duration_sum[api] = into.duration_sum.get(api, 0.0) + seconds
    for api, n in found.get("duration_count", {}).items():
        into.duration_count[api] += n


class SharedMetrics:
    """This worker's ``metrics``, written to ``directory`` beside the other workers'."""

    def __init__(self, metrics: Metrics, directory: str | Path) -> None:
        self.metrics = metrics
        self.directory = Path(directory)
        self.path = self.directory / f"{os.getpid()}-{new_ulid()}.json"

    def write(self) -> None:
        written = self.path.with_suffix(".tmp")
        written.write_text(json.dumps(snapshot(self.metrics)))
        os.replace(written, self.path)

    def render(self) -> str:
        self.write()
        total = Metrics()
        for path in sorted(self.directory.glob("*.json")):
            try:
                absorb(total, json.loads(path.read_text()))
            except (OSError, ValueError):  # a worker's file being replaced: its next one counts
                continue
        return total.render()

    async def keep_writing(self) -> None:
        """Write every second until cancelled (the application's lifespan), then once more."""
        try:
            while True:
                await anyio.sleep(WRITE_SECONDS)
                self.write()
        finally:
            self.write()
