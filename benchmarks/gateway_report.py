"""The gateway benchmark's figures (benchmarks/gateway.py): one cell per route, number of
concurrent streams and target (the upstream straight, or a gateway), and its tables."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Cell:
    route: str
    route_name: str
    kind: str
    target: str  # "upstream", "metis", "litellm"
    concurrency: int
    result: dict[str, Any]

    @property
    def done(self) -> int:
        return len(self.result["latencies"])

    def latency_ms(self, q: float) -> float:
        return percentile(self.result["latencies"], q) * 1000

    @property
    def cpu_per_request_ms(self) -> float:
        return self.result["server_cpu"] / self.done * 1000 if self.done else float("nan")

    @property
    def requests_per_second(self) -> float:
        return self.done / self.result["wall"] if self.result["wall"] else float("nan")

    @property
    def errors(self) -> int:
        return len(self.result["errors"])

    def saved(self) -> dict[str, Any]:
        """Every figure, to rebuild the cell from (``--report-from``)."""
        fields = ("route", "route_name", "kind", "target", "concurrency", "result")
        return {name: getattr(self, name) for name in fields} | {"summary": self.summary()}

    def summary(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "target": self.target,
            "concurrency": self.concurrency,
            "requests": self.done,
            "errors": self.result["errors"][:5],
            "error_count": self.errors,
            "p50_ms": self.latency_ms(0.5),
            "p99_ms": self.latency_ms(0.99),
            "first_byte_p50_ms": percentile(self.result["firsts"], 0.5) * 1000,
            "cpu_per_request_ms": self.cpu_per_request_ms,
            "requests_per_second": self.requests_per_second,
            "load_average": self.result["load_average"],
            "load_generator_cpu_s": self.result["client_cpu"],
        }

    def against(self, upstream: Cell) -> None:
        """Keep the upstream's percentiles of the same run: the added latency is against them."""
        self.result["upstream_ms"] = {
            "0.5": upstream.latency_ms(0.5),
            "0.99": upstream.latency_ms(0.99),
        }
        self.result["upstream_first_ms"] = {
            "0.5": upstream.first_byte_ms(0.5),
            "0.99": upstream.first_byte_ms(0.99),
        }

    def first_byte_ms(self, q: float) -> float:
        return percentile(self.result["firsts"], q) * 1000

    def added_ms(self, q: float) -> float:
        return self.latency_ms(q) - self.result["upstream_ms"][str(q)]

    def added_first_ms(self, q: float) -> float:
        """Time to the first body byte, the gateway's against the upstream's."""
        known = self.result.get("upstream_first_ms")
        return self.first_byte_ms(q) - known[str(q)] if known else float("nan")

    def line(self, upstream: Cell) -> str:
        return (
            f"{self.route} {self.target} x{self.concurrency}: p50 {self.latency_ms(0.5):.2f} ms "
            f"(+{self.latency_ms(0.5) - upstream.latency_ms(0.5):.2f}), "
            f"p99 {self.latency_ms(0.99):.2f} ms "
            f"(+{self.latency_ms(0.99) - upstream.latency_ms(0.99):.2f}), "
            f"CPU {self.cpu_per_request_ms:.2f} ms/request, {self.requests_per_second:.0f}/s, "
            f"{self.errors} errors, load {self.result['load_average']:.1f}"
        )


def load_cells(paths: list[str]) -> list[Cell]:
    """The cells of earlier runs' ``--json`` files, in their order."""
    cells: list[Cell] = []
    for path in paths:
        run = [
            Cell(**{k: v for k, v in saved.items() if k != "summary"})
            for saved in json.loads(Path(path).read_text())
        ]
        for cell in run:
            if cell.target != "upstream" and "upstream_first_ms" not in cell.result:
                straight = [
                    c
                    for c in run
                    if (c.route, c.concurrency, c.target)
                    == (cell.route, cell.concurrency, "upstream")
                ]
                cell.against(straight[0])
        known = {(c.route, c.concurrency, c.target) for c in cells}
        cells += [c for c in run if (c.route, c.concurrency, c.target) not in known]
    return cells


HEAD = (
    "| streams | target | requests | p50 ms | p99 ms | added p50 ms | added p99 ms "
    "| added first byte p50 | p99 ms | gateway CPU ms/request | x metis CPU | requests/s "
    "| errors | load avg |\n"
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _row(cell: Cell, metis: Cell | None) -> str:
    load = f"{cell.result['load_average']:.1f}"
    p50, p99 = cell.latency_ms(0.5), cell.latency_ms(0.99)
    added, cpu, ratio = "— | — | — | —", "—", "—"
    if cell.target != "upstream":
        added = f"{cell.added_ms(0.5):.2f} | {cell.added_ms(0.99):.2f}"
        added += f" | {cell.added_first_ms(0.5):.2f} | {cell.added_first_ms(0.99):.2f}"
        cpu = f"{cell.cpu_per_request_ms:.2f}"
        if metis is not None and metis.cpu_per_request_ms:  # 0: a run under the clock's tick
            ratio = f"{cell.cpu_per_request_ms / metis.cpu_per_request_ms:.1f}x"
    return (
        f"| {cell.concurrency:,} | {cell.target} | {cell.done} | {p50:.2f} | {p99:.2f} "
        f"| {added} | {cpu} | {ratio} | {cell.requests_per_second:.0f} | {cell.errors} | {load} |"
    )


def markdown(cells: list[Cell], workers: int) -> str:
    """One table per route; then, per cell, metis's CPU per request against LiteLLM's."""
    out: list[str] = []
    routes = list(dict.fromkeys(c.route for c in cells))
    for route in routes:
        mine = [c for c in cells if c.route == route]
        out.append(f"#### {mine[0].route_name} ({mine[0].kind}; {workers} worker(s))\n\n{HEAD}")
        for concurrency in dict.fromkeys(c.concurrency for c in mine):
            row = {c.target: c for c in mine if c.concurrency == concurrency}
            for cell in row.values():
                out.append(_row(cell, row.get("metis")))
        out.append("")
    goals = _goals(cells)
    if goals:
        out.append(goals)
    return "\n".join(out)


def _goals(cells: list[Cell]) -> str:
    lines = [
        "| route | streams | metis / LiteLLM CPU per request | metis added p99 ms "
        "| requests/s on 2 cores from CPU: metis | LiteLLM |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for cell in cells:
        if cell.target != "metis":
            continue
        where = (cell.route, cell.concurrency)
        other = next(
            (c for c in cells if (c.route, c.concurrency, c.target) == (*where, "litellm")), None
        )
        ratio, theirs = "—", "—"
        if other is not None and other.cpu_per_request_ms:  # 0: a run under the clock's tick
            ratios.append(cell.cpu_per_request_ms / other.cpu_per_request_ms)
            ratio = f"{ratios[-1]:.3f}"
            theirs = f"{2000 / other.cpu_per_request_ms:.0f}"
        mine = f"{2000 / cell.cpu_per_request_ms:.0f}" if cell.cpu_per_request_ms else "—"
        lines.append(
            f"| {cell.route} | {cell.concurrency:,} | {ratio} | {cell.added_ms(0.99):.2f} "
            f"| {mine} | {theirs} |"
        )
    if ratios:
        lines.append(f"\nmedian metis / LiteLLM CPU per request: {statistics.median(ratios):.3f}")
    return "\n".join(lines)
