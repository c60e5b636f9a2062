"""Run the benchmarks: ``python -m benchmarks [--quick] [--json out.json] [--markdown out.md]``.

Starts the loopback server (benchmarks/server.py) in its own process, runs each measurement in
a fresh client process (benchmarks/child.py), prints one Markdown table per section, with
medians and ratios to the floor or to the baseline, and writes everything as JSON. Sections:

1. ``stream``: client CPU per long stream (2,000 text deltas, then a tool call whose input
   arrives in 200 fragments), consumed into a final message with the tool input parsed; for
   each of the five wire formats, in two regimes: one event per HTTP chunk, and large reads
   (16 KiB chunks cut anywhere).
2. ``complete``: client CPU per non-streamed call with a 40-message history, tools, images.
3. ``import``: ``import`` and set-up, wall time and peak RSS, in fresh interpreters.
4. ``concurrency``: 10,000 concurrent streams in one process, under asyncio and trio.
5. ``scaling``: cost against stream length and against history length.

The anchors (anthropic, openai, litellm) come from ``pip install -e '.[bench]'``; a column
whose library is missing is skipped. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.clients import ANCHORS, CLIENTS, HISTORY_PROVIDERS, PROVIDERS, available
from benchmarks.server import ServerProcess
from benchmarks.workload import Scenario

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("stream", "complete", "import", "concurrency", "scaling")
STREAM_TARGET = 1.0  # metis CPU per stream, as a multiple of the floor's
COMPLETE_TARGET = 1.3  # metis CPU per non-streamed call, as a multiple of the floor's
IMPORT_TARGET = 1.3  # metis import + adapter, as a multiple of the dependencies + one model
LARGE_READS = 16384  # bytes per HTTP chunk in the large-read regime
LINEAR_SLOPE = 1.2  # log-log slope over the largest decade; 1 is linear, 2 quadratic


@dataclass
class Config:
    sections: list[str] = field(default_factory=lambda: list(SECTIONS))
    providers: list[str] = field(default_factory=lambda: list(PROVIDERS))
    clients: list[str] = field(default_factory=lambda: list(CLIENTS))
    read_sizes: list[int] = field(default_factory=lambda: [0, LARGE_READS])
    """The stream regimes: 0 is one event per HTTP chunk; else the HTTP chunk size."""
    concurrency_providers: list[str] = field(default_factory=lambda: ["anthropic", "openai"])
    concurrency_clients: list[str] = field(default_factory=lambda: ["floor", "metis"])
    scaling_providers: list[str] = field(default_factory=lambda: ["anthropic", "openai"])
    deltas: int = 2000
    fragments: int = 200
    runs: int = 30
    warmup: int = 5
    rounds: int = 3
    messages: int = 40
    images: int = 4
    complete_runs: int = 30
    import_runs: int = 7
    concurrency: int = 10_000
    concurrency_deltas: int = 100
    backends: list[str] = field(default_factory=lambda: ["asyncio", "trio"])
    scaling_clients: list[str] = field(default_factory=lambda: ["floor", "metis"])
    stream_sizes: list[int] = field(default_factory=lambda: [100, 1000, 10_000, 100_000])
    history_sizes: list[int] = field(default_factory=lambda: [1, 10, 100, 1000])
    scaling_runs: int = 20
    stream_budget: int = 400_000  # deltas per scaling point: fewer runs for longer streams
    history_budget: int = 4_000  # messages per scaling point
    child_timeout: float = 900.0

    @classmethod
    def quick(cls) -> Config:
        return cls(
            runs=8,
            warmup=2,
            rounds=1,
            complete_runs=10,
            import_runs=3,
            concurrency=1000,
            stream_sizes=[100, 1000, 10_000],
            history_sizes=[1, 10, 100],
            scaling_runs=5,
            stream_budget=50_000,
            history_budget=500,
        )

    @classmethod
    def tiny(cls) -> Config:
        """What the test suite's smoke run uses: every code path, at a size of nothing."""
        return cls(
            clients=["floor", "floor-fast", "metis"],
            deltas=20,
            fragments=5,
            runs=2,
            warmup=1,
            rounds=1,
            messages=6,
            images=1,
            complete_runs=2,
            import_runs=1,
            concurrency=5,
            concurrency_deltas=5,
            stream_sizes=[10, 40],
            history_sizes=[1, 8],
            scaling_runs=2,
            stream_budget=40,
            history_budget=8,
            child_timeout=120.0,
        )


# Helpers ----------------------------------------------------------------------------------


def run_child(job: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.child", json.dumps(job)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"child exited {proc.returncode}: {' | '.join(tail)}"[:500]}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        v = values[0] if values else math.nan
        return v, v
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def ms(seconds: float) -> str:
    return "—" if math.isnan(seconds) else f"{seconds * 1e3:.2f}"


def ratio(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}x"


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    versions = {}
    for module in ("metis", "httpx", "pydantic", "anyio", "trio", "anthropic", "openai", "litellm"):
        try:
            from importlib.metadata import version

            versions[module] = version(module)
        except Exception:
            versions[module] = None
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "versions": versions,
    }


def columns(config: Config, provider: str, among: list[str] | None = None) -> list[str]:
    names = among if among is not None else config.clients
    return [c for c in names if c in config.clients and available(c, provider)]


# Sections ---------------------------------------------------------------------------------


STREAM_HEADERS = (
    "reads",
    "provider",
    "client",
    "runs",
    "median ms",
    "p25-p75 ms",
    "wall ms",
    "x floor",
    "x floor-fast",
    "ok",
)


def _regime(read_size: int) -> str:
    return f"{read_size // 1024} KiB" if read_size else "1 event"


def section_stream(config: Config, url: str, kind: str) -> dict[str, Any]:
    """Sections 1 and 2: CPU per call for each column, rounds interleaved, pooled."""
    if kind == "stream":
        cases = [
            (Scenario(config.deltas, config.fragments, reads).name, reads, provider)
            for reads in config.read_sizes
            for provider in config.providers
        ]
        runs_total, extra = config.runs, {}
    else:
        providers = [p for p in config.providers if p in HISTORY_PROVIDERS]
        cases = [(Scenario(20, 5).name, 0, provider) for provider in providers]
        runs_total = config.complete_runs
        extra = {"messages": config.messages, "images": config.images}
    rows: list[dict[str, Any]] = []
    for scenario, reads, provider in cases:
        rows += _measure_case(config, url, kind, scenario, provider, runs_total, extra, reads)
    title = (
        f"1. Streaming: client CPU per stream ({config.deltas:,} text deltas, then a tool call "
        f"in {config.fragments:,} fragments; reads: one event per HTTP chunk, or "
        f"{LARGE_READS // 1024} KiB chunks; median of the runs after {config.warmup} warm-up "
        f"per process, {config.rounds} process(es) per column)"
        if kind == "stream"
        else f"2. Non-streaming: client CPU per call ({config.messages}-message history with "
        f"tools and {config.images} images: encode, send, parse the reply)"
    )
    table = markdown(
        [*STREAM_HEADERS],
        [
            [
                _regime(r["read_size"]),
                r["provider"],
                r["client"],
                str(r["runs"]),
                ms(r["median_cpu_s"]),
                f"{ms(r['p25_cpu_s'])}-{ms(r['p75_cpu_s'])}",
                ms(r["median_wall_s"]),
                ratio(r["ratio_to_floor"]),
                ratio(r["ratio_to_floor_fast"]),
                "yes" if not r["errors"] else "NO: " + r["errors"][0][:60],
            ]
            for r in rows
        ],
    )
    result: dict[str, Any] = {"title": title, "rows": rows, "table": table}
    target = STREAM_TARGET if kind == "stream" else COMPLETE_TARGET
    result["target"] = {
        "metis_max_ratio": target,
        "met": {
            f"{r['provider']}/{_regime(r['read_size'])}": r["ratio_to_floor"] <= target
            for r in rows
            if r["client"] == "metis"
        },
    }
    return result


def _measure_case(
    config: Config,
    url: str,
    kind: str,
    scenario: str,
    provider: str,
    runs_total: int,
    extra: dict[str, Any],
    read_size: int,
) -> list[dict[str, Any]]:
    """Every column on one scenario and provider, rounds interleaved, runs pooled."""
    per_round = max(1, math.ceil(runs_total / config.rounds))
    names = columns(config, provider)
    pooled: dict[str, dict[str, Any]] = {n: {"cpu": [], "wall": [], "errors": []} for n in names}
    for _ in range(config.rounds):
        for name in names:
            job = {
                "kind": kind,
                "client": name,
                "provider": provider,
                "url": url,
                "scenario": scenario,
                "warmup": config.warmup,
                "runs": per_round,
                **extra,
            }
            result = run_child(job, config.child_timeout)
            pooled[name]["cpu"] += result.get("cpu", [])
            pooled[name]["wall"] += result.get("wall", [])
            if result.get("error"):
                pooled[name]["errors"].append(result["error"])
    floors = {
        n: median(pooled[n]["cpu"]) if n in pooled else math.nan for n in ("floor", "floor-fast")
    }
    rows = []
    for name in names:
        cpu = pooled[name]["cpu"]
        p25, p75 = quartiles(cpu)
        rows.append(
            {
                "read_size": read_size,
                "scenario": scenario,
                "provider": provider,
                "client": name,
                "runs": len(cpu),
                "median_cpu_s": median(cpu),
                "p25_cpu_s": p25,
                "p75_cpu_s": p75,
                "median_wall_s": median(pooled[name]["wall"]),
                "ratio_to_floor": median(cpu) / floors["floor"] if floors["floor"] else math.nan,
                "ratio_to_floor_fast": (
                    median(cpu) / floors["floor-fast"] if floors["floor-fast"] else math.nan
                ),
                "errors": pooled[name]["errors"],
            }
        )
    return rows


IMPORT_PROBE = """\
import json, resource, sys, time
t0 = time.perf_counter()
{code}
t1 = time.perf_counter()
print("IMPORT " + json.dumps({{"seconds": t1 - t0,
    "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "modules": len(sys.modules)}}))
"""

IMPORT_ROWS: list[tuple[str, str, str | None]] = [
    ("python (nothing)", "pass", None),
    ("metis's dependencies", "import httpx, pydantic, anyio, tenacity, yaml, ulid", None),
    (
        "metis's dependencies, BaseModel loaded",
        "import httpx, pydantic, anyio, tenacity, yaml, ulid\npydantic.BaseModel",
        None,
    ),
    (
        "metis's dependencies, one pydantic model",
        "import httpx, pydantic, anyio, tenacity, yaml, ulid\n"
        "class M(pydantic.BaseModel):\n    x: int\nM(x=1)",
        None,
    ),
    ("import metis", "import metis", None),
    (
        "metis + anthropic adapter",
        "import metis\nmetis.build_adapter('anthropic', metis.AdapterConfig(api_key='x'))",
        None,
    ),
    (
        "metis + openai adapter",
        "import metis\nmetis.build_adapter('openai', metis.AdapterConfig(api_key='x'))",
        None,
    ),
    *[
        (
            f"metis + {stack} adapter",
            f"import metis\nmetis.build_adapter('{stack}', metis.AdapterConfig(api_key='x'))",
            None,
        )
        for stack in ("openai_responses", "gemini", "ollama")
    ],
    ("import anthropic", "import anthropic", "anthropic"),
    (
        "anthropic + AsyncAnthropic()",
        "import anthropic\nanthropic.AsyncAnthropic(api_key='x')",
        "anthropic",
    ),
    ("import openai", "import openai", "openai"),
    ("openai + AsyncOpenAI()", "import openai\nopenai.AsyncOpenAI(api_key='x')", "openai"),
    ("import litellm", "import litellm", "litellm"),
]


def section_import(config: Config) -> dict[str, Any]:
    import importlib.util
    import time

    rows_spec = [
        r
        for r in IMPORT_ROWS
        if r[2] is None
        or (importlib.util.find_spec(r[2]) is not None and r[2] in _anchor_modules(config))
    ]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "ignore"}
    # Round 0 must be able to write bytecode, as pip does for an installed package: with
    # PYTHONDONTWRITEBYTECODE set (as on some machines), metis's editable checkout would be
    # compiled from source in every probe (~30 ms) while its dependencies' .pyc were cached.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    samples: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in rows_spec}
    errors: dict[str, str] = {}
    for round_ in range(config.import_runs + 1):  # round 0 warms the bytecode caches
        for label, code, _ in rows_spec:
            w0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", IMPORT_PROBE.format(code=code)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env=env,
                timeout=config.child_timeout,
            )
            wall = time.perf_counter() - w0
            line = next((x for x in proc.stdout.splitlines() if x.startswith("IMPORT ")), None)
            if line is None:
                errors[label] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
                continue
            if round_:
                samples[label].append({**json.loads(line[7:]), "process_wall": wall})
    rows = []
    for label, _, _ in rows_spec:
        got = samples[label]
        rows.append(
            {
                "what": label,
                "runs": len(got),
                "import_s": median([s["seconds"] for s in got]),
                "process_wall_s": median([s["process_wall"] for s in got]),
                "peak_rss_mib": median([s["maxrss_kib"] / 1024 for s in got]),
                "modules": int(median([s["modules"] for s in got])) if got else 0,
                "error": errors.get(label),
            }
        )
    bare = next(r for r in rows if r["what"] == "python (nothing)")
    deps = next(r for r in rows if r["what"] == "metis's dependencies")
    model = next(r for r in rows if r["what"] == "metis's dependencies, one pydantic model")
    for r in rows:
        r["time_vs_deps"] = r["import_s"] / deps["import_s"] if deps["import_s"] else math.nan
        r["time_vs_deps_model"] = (
            r["import_s"] / model["import_s"] if model["import_s"] else math.nan
        )
        r["rss_vs_deps"] = r["peak_rss_mib"] / deps["peak_rss_mib"]
        added = deps["peak_rss_mib"] - bare["peak_rss_mib"]
        r["added_rss_vs_deps"] = (
            (r["peak_rss_mib"] - bare["peak_rss_mib"]) / added if added else math.nan
        )
    table = markdown(
        [
            "what",
            "runs",
            "import+setup ms",
            "process wall ms",
            "peak RSS MiB",
            "modules",
            "time x deps",
            "time x deps+model",
            "RSS x deps",
        ],
        [
            [
                r["what"],
                str(r["runs"]),
                ms(r["import_s"]),
                ms(r["process_wall_s"]),
                f"{r['peak_rss_mib']:.1f}",
                str(r["modules"]),
                ratio(r["time_vs_deps"]),
                ratio(r["time_vs_deps_model"]),
                ratio(r["rss_vs_deps"]),
            ]
            for r in rows
        ],
    )
    setups = [r for r in rows if r["what"].startswith("metis +")]
    return {
        "title": "3. Import and set-up in a fresh interpreter (medians; bytecode cached)",
        "rows": rows,
        "table": table,
        "target": {
            "metis_max_ratio": IMPORT_TARGET,
            # pydantic builds its schema machinery on the first model any library defines:
            # the floor for a library whose public types are pydantic models
            "met": {
                r["what"]: r["time_vs_deps_model"] <= IMPORT_TARGET
                and r["rss_vs_deps"] <= IMPORT_TARGET
                for r in setups
            },
        },
    }


def _anchor_modules(config: Config) -> set[str]:
    return {module for client, module in ANCHORS.items() if client in config.clients}


def section_concurrency(config: Config, url: str) -> dict[str, Any]:
    scenario = Scenario(config.concurrency_deltas, max(1, config.concurrency_deltas // 10)).name
    rows = []
    for backend in config.backends:
        for provider in config.concurrency_providers:
            for name in columns(config, provider, config.concurrency_clients):
                if backend != "asyncio" and name in ANCHORS:
                    continue  # the anchors run on asyncio only
                job = {
                    "kind": "concurrency",
                    "client": name,
                    "provider": provider,
                    "url": url,
                    "scenario": scenario,
                    "backend": backend,
                    "n": config.concurrency,
                    "max_connections": config.concurrency,
                    "barrier_timeout": 60.0,
                }
                result = run_child(job, config.child_timeout)
                rows.append({"backend": backend, "provider": provider, "client": name, **result})
    table = markdown(
        [
            "backend",
            "provider",
            "client",
            "streams",
            "wall s",
            "CPU s",
            "in flight",
            "peak KiB/stream",
            "errors",
        ],
        [
            [
                r["backend"],
                r["provider"],
                r["client"],
                str(r.get("n", "—")),
                f"{r['wall']:.2f}" if "wall" in r else "—",
                f"{r['cpu']:.2f}" if "cpu" in r else "—",
                str(r.get("in_flight", "—")),
                f"{r['kib_per_stream']:.0f}" if "kib_per_stream" in r else "—",
                str(r.get("errors", "—")) if not r.get("error") else "FAILED: " + r["error"][:60],
            ]
            for r in rows
        ],
    )
    return {
        "title": (
            f"4. Concurrency: {config.concurrency:,} concurrent streams in one process "
            f"({scenario}; every stream holds its first event until all have one)"
        ),
        "scenario": scenario,
        "rows": rows,
        "table": table,
        "no_errors": all(not r.get("error") and r.get("errors") == 0 for r in rows),
    }


def section_scaling(config: Config, url: str) -> dict[str, Any]:
    curves = []
    for kind, sizes, budget in (
        ("scale-stream", config.stream_sizes, config.stream_budget),
        ("scale-history", config.history_sizes, config.history_budget),
    ):
        for provider in config.scaling_providers:
            for name in columns(config, provider, config.scaling_clients):
                job = {
                    "kind": kind,
                    "client": name,
                    "provider": provider,
                    "url": url,
                    "scenario": Scenario(20, 5).name,
                    "sizes": sizes,
                    "runs": config.scaling_runs,
                    "min_runs": 3 if config.scaling_runs >= 3 else config.scaling_runs,
                    "budget": budget,
                }
                result = run_child(job, config.child_timeout)
                curves.append(
                    {
                        "kind": "stream length" if kind == "scale-stream" else "history length",
                        "provider": provider,
                        "client": name,
                        "points": [
                            {
                                "size": p["size"],
                                "runs": len(p.get("cpu", [])),
                                "median_cpu_s": median(p.get("cpu", [])),
                                "error": p.get("error"),
                            }
                            for p in result.get("points", [])
                        ],
                        "error": result.get("error"),
                    }
                )
    return scaling_report(curves)


def scaling_report(curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Slopes, verdicts and tables for measured curves.

    ``slope`` is the log-log slope of the cost from the previous size. A fixed per-call cost
    flattens it at small sizes and could hide a quadratic term, so the verdict uses the
    *marginal* slope: of the cost above the smallest size's, from the previous size to this
    one (1 when each added delta or message costs the same, 2 when the cost is quadratic),
    where that cost is large enough to measure.
    """
    for curve in curves:
        points = curve["points"]
        for prev, point in itertools.pairwise(points):
            point["slope"] = _slope(prev, point)
        base = points[0]["median_cpu_s"] if points else math.nan
        for prev, point in itertools.pairwise(points[1:]):
            # Only where the previous size's variable cost stands out of the fixed cost's
            # noise: a difference of two near-equal medians says nothing.
            if prev["median_cpu_s"] - base >= 0.5 * base:
                point["marginal_slope"] = _slope(prev, point, base)
        top = points[-1].get("marginal_slope", math.nan) if points else math.nan
        curve["top_marginal_slope"] = top
        if math.isnan(top):  # the variable cost never rose clear of the fixed cost's noise
            plain = points[-1].get("slope", math.nan) if points else math.nan
            curve["linear"] = (not math.isnan(plain)) and plain <= LINEAR_SLOPE
            curve["verdict"] = "fixed cost dominates" if curve["linear"] else "undetermined"
        else:
            curve["linear"] = top <= LINEAR_SLOPE
            curve["verdict"] = "linear" if curve["linear"] else "NOT linear"
    rows = []
    for c in curves:
        for p in c["points"]:
            rows.append(
                [
                    c["kind"],
                    c["provider"],
                    c["client"],
                    f"{p['size']:,}",
                    str(p["runs"]),
                    ms(p["median_cpu_s"]),
                    f"{p['median_cpu_s'] / p['size'] * 1e6:.1f}",
                    _num(p.get("slope")),
                    _num(p.get("marginal_slope")),
                ]
            )
    table = markdown(
        [
            "what grows",
            "provider",
            "client",
            "size",
            "runs",
            "median ms",
            "µs per unit",
            "slope",
            "marginal slope",
        ],
        rows,
    )
    verdicts = markdown(
        ["what grows", "provider", "client", "marginal slope, largest step", "verdict"],
        [
            [
                c["kind"],
                c["provider"],
                c["client"],
                _num(c["top_marginal_slope"]),
                c["verdict"] + (f" (error: {c['error'][:50]})" if c["error"] else ""),
            ]
            for c in curves
        ],
    )
    return {
        "title": (
            "5. Scaling: client CPU per call against stream length (text deltas; tool "
            "fragments = deltas / 10) and history length (messages, non-streamed). Slopes are "
            "log-log, from the previous size: 1 is linear, 2 quadratic; the marginal slope "
            "leaves out the fixed cost of a call (the smallest size's)"
        ),
        "curves": curves,
        "table": table + "\n\n" + verdicts,
    }


def _num(value: float | None) -> str:
    return "" if value is None else "—" if math.isnan(value) else f"{value:.2f}"


def _slope(a: dict[str, Any], b: dict[str, Any], base: float = 0.0) -> float:
    try:
        return math.log((b["median_cpu_s"] - base) / (a["median_cpu_s"] - base)) / math.log(
            b["size"] / a["size"]
        )
    except (ValueError, ZeroDivisionError):
        return math.nan


# Driver -----------------------------------------------------------------------------------


def run(config: Config, echo: bool = True) -> dict[str, Any]:
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": asdict(config),
        "sections": {},
    }

    def show(name: str, section: dict[str, Any]) -> None:
        report["sections"][name] = section
        if echo:
            print(f"\n## {section['title']}\n\n{section['table']}\n", flush=True)

    if echo:
        m = report["machine"]
        print(f"{m['cpu']}, {m['cores']} cores, {m['memory']}, Python {m['python']}")
    if "import" in config.sections:
        show("import", section_import(config))
    needs_server = [s for s in config.sections if s != "import"]
    if needs_server:
        with ServerProcess() as url:
            for name in needs_server:
                if name in ("stream", "complete"):
                    show(name, section_stream(config, url, name))
                elif name == "concurrency":
                    show(name, section_concurrency(config, url))
                elif name == "scaling":
                    show(name, section_scaling(config, url))
    return report


def markdown_report(report: dict[str, Any]) -> str:
    m = report["machine"]
    head = (
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}; {m['implementation']} "
        f"{m['python']} on {m['platform']}. Date: {report['date']}.\n"
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v) + "."
    )
    parts = [head]
    for section in report["sections"].values():
        parts.append(f"### {section['title']}\n\n{section['table']}")
    return "\n\n".join(parts) + "\n"


def _clean(value: Any) -> Any:
    """The report as strict JSON: NaN (a missing measurement) becomes null."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def parse_args(argv: list[str] | None) -> tuple[Config, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="metis beside the official SDKs and LiteLLM."
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs, smaller sizes")
    parser.add_argument("--tiny", action="store_true", help="the smoke test's size; no meaning")
    parser.add_argument("--json", metavar="PATH", help="write the whole report as JSON")
    parser.add_argument("--markdown", metavar="PATH", help="write the tables as Markdown")
    parser.add_argument("--sections", help=f"comma-separated, of {','.join(SECTIONS)}")
    parser.add_argument("--providers", help=f"comma-separated, of {','.join(PROVIDERS)}")
    parser.add_argument("--clients", help=f"comma-separated, of {','.join(CLIENTS)}")
    parser.add_argument("--deltas", type=int, help="text deltas per stream (section 1)")
    parser.add_argument("--fragments", type=int, help="tool input fragments (section 1)")
    parser.add_argument("--runs", type=int, help="measured runs per column (section 1)")
    parser.add_argument("--warmup", type=int, help="warm-up calls per process")
    parser.add_argument("--rounds", type=int, help="processes per column, interleaved")
    parser.add_argument("--concurrency", type=int, help="concurrent streams (section 4)")
    parser.add_argument("--backends", help="comma-separated: asyncio,trio (section 4)")
    parser.add_argument(
        "--concurrency-clients", help="comma-separated columns of section 4 (floor,metis)"
    )
    parser.add_argument(
        "--concurrency-providers", help="comma-separated formats of section 4 (anthropic,openai)"
    )
    parser.add_argument(
        "--reads", help="comma-separated regimes of section 1: 0 (one event per chunk), 16384"
    )
    args = parser.parse_args(argv)
    config = Config.tiny() if args.tiny else Config.quick() if args.quick else Config()
    lists = ("sections", "providers", "clients", "backends", "concurrency_clients")
    for name in (*lists, "concurrency_providers"):
        value = getattr(args, name)
        if value:
            setattr(config, name, [v.strip() for v in value.split(",") if v.strip()])
    for name in ("deltas", "fragments", "runs", "warmup", "rounds", "concurrency"):
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    if args.reads:
        config.read_sizes = [int(v) for v in args.reads.split(",") if v.strip()]
    unknown = (
        set(config.sections) - set(SECTIONS)
        or set(config.clients) - set(CLIENTS)
        or set(config.providers) - set(PROVIDERS)
    )
    if unknown:
        parser.error(f"unknown: {', '.join(sorted(unknown))}")
    if "floor" not in config.clients:
        config.clients.insert(0, "floor")  # every ratio is to the floor
    if "floor-fast" not in config.clients:
        config.clients.insert(1, "floor-fast")
    return config, args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config, args = parse_args(argv)
    report = run(config)
    if args.json:
        Path(args.json).write_text(json.dumps(_clean(report), indent=2, allow_nan=False) + "\n")
        print(f"wrote {args.json}")
    if args.markdown:
        Path(args.markdown).write_text(markdown_report(report))
        print(f"wrote {args.markdown}")
    return report


if __name__ == "__main__":
    main()
