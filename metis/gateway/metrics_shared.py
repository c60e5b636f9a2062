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
        "requests": [[*key, n] for key, n in metrics.requests.items()],
        "errors": [[*key, n] for key, n in metrics.errors.items()],
        "failed_attempts": [[m, k, n] for (m, k), n in metrics.failed_attempts.items()],
        "tokens": [[m, d, n] for (m, d), n in metrics.tokens.items()],
        "estimated": [[m, d, n] for (m, d), n in metrics.estimated.items()],
        "cost": [[m, str(usd)] for m, usd in metrics.cost.items()],
        "durations": [[a, e, counts] for (a, e), counts in metrics.durations.items()],
        "duration_sum": [[a, e, s] for (a, e), s in metrics.duration_sum.items()],
        "duration_count": [[a, e, n] for (a, e), n in metrics.duration_count.items()],
    }


def absorb(into: Metrics, found: dict[str, Any]) -> None:
    """Add a worker's counts (a :func:`snapshot`) to ``into``."""
    for a, e, m, s, n in found.get("requests", ()):
        into.requests[(a, e, m, int(s))] += n
    for a, e, k, n in found.get("errors", ()):
        into.errors[(a, e, k)] += n
    for m, k, n in found.get("failed_attempts", ()):
        into.failed_attempts[(m, k)] += n
    for m, d, n in found.get("tokens", ()):
        into.tokens[(m, d)] += n
    for m, d, n in found.get("estimated", ()):
        into.estimated[(m, d)] += n
    for m, usd in found.get("cost", ()):
        into.cost[m] = into.cost.get(m, Decimal(0)) + Decimal(usd)
    for a, e, counts in found.get("durations", ()):
        mine = into.durations.setdefault((a, e), [0] * len(counts))
        into.durations[(a, e)] = [x + y for x, y in zip(mine, counts, strict=True)]
    for a, e, seconds in found.get("duration_sum", ()):
        into.duration_sum[(a, e)] = into.duration_sum.get((a, e), 0.0) + seconds
    for a, e, n in found.get("duration_count", ()):
        into.duration_count[(a, e)] += n


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
