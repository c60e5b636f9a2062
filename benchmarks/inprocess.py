"""floor and metis side by side in one process: ``python -m benchmarks.inprocess``.

On a shared machine the full run's columns (a process each, minutes apart) see different
loads; here the floor's and metis's calls alternate in one process against the loopback
server, so both see the same machine, call by call. CPU is ``time.process_time()`` around
each call, ``gc.collect()`` before it (outside the timing); each cell is the median after
warm-up, and the ratio is metis's median over the floor's of the same rounds.

- ``stream``: the section-1 workload (2,000 text deltas, a tool call in 200 fragments) in the
  five formats, one event per HTTP chunk and 16 KiB reads; metis with invariants on.
- ``complete``: the section-2 call (a 40-message history, tools, 4 images), Anthropic and
  OpenAI Chat.
- ``import``: fresh interpreters, interleaved: the dependencies with one pydantic model,
  beside ``import metis`` and one adapter built; CPU time of the statements
  (``process_time``, which the load moves less than wall time).

    python -m benchmarks.inprocess                       # everything, ~5 minutes
    python -m benchmarks.inprocess --sections stream --providers gemini --reads 16384
    python -m benchmarks.inprocess --json out.json
    python -m benchmarks.inprocess --sections import --import-baseline /tmp/old  # old vs new
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from benchmarks import workload
from benchmarks.child import verify
from benchmarks.clients import HISTORY_PROVIDERS, PROVIDERS, Client, Outcome, make_client
from benchmarks.server import ServerProcess
from benchmarks.workload import Scenario

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("stream", "complete", "import")
IMPORT_DEPS = "import httpx, pydantic, anyio, tenacity, yaml, ulid"
IMPORT_CASES = {
    "deps + one model": IMPORT_DEPS + "\nclass M(pydantic.BaseModel):\n    x: int\nM(x=1)",
    "import metis": "import metis",
    **{
        f"metis + {stack}": (
            f"import metis\nmetis.build_adapter('{stack}', metis.AdapterConfig(api_key='x'))"
        )
        for stack in ("anthropic", "openai", "openai_responses", "gemini", "ollama")
    },
}
IMPORT_PROBE = """\
import sys, time
c0 = time.process_time()
{code}
c1 = time.process_time()
print("CPU", c1 - c0, len(sys.modules))
"""


async def _alternate(
    calls: dict[str, Callable[[], Awaitable[Outcome]]],
    check: Callable[[str, Outcome], str],
    warmup: int,
    runs: int,
) -> dict[str, list[float]]:
    """Each call in turn, ``warmup`` + ``runs`` rounds; CPU seconds of the timed rounds."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(warmup + runs):
        for name, call in calls.items():
            gc.collect()
            c0 = time.process_time()
            outcome = await call()
            cpu = time.process_time() - c0
            problem = check(name, outcome)
            if problem:
                raise SystemExit(f"{name}: {problem}")
            if round_ >= warmup:
                samples[name].append(cpu)
    return samples


def _row(kind: str, provider: str, reads: int, samples: dict[str, list[float]]) -> dict[str, Any]:
    floor = statistics.median(samples["floor"])
    metis = statistics.median(samples["metis"])
    return {
        "kind": kind,
        "provider": provider,
        "reads": reads,
        "floor_ms": floor * 1000,
        "metis_ms": metis * 1000,
        "ratio": metis / floor,
        "load": os.getloadavg()[0],
    }


async def _clients(provider: str, url: str) -> dict[str, Client]:
    return {name: make_client(name, provider, url) for name in ("floor", "metis")}


async def section_stream(url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for reads in args.reads:
        scenario = Scenario(2000, 200, reads)
        for provider in args.providers:
            clients = await _clients(provider, url)
            try:
                samples = await _alternate(
                    {n: (lambda c=c, s=scenario: c.stream(s)) for n, c in clients.items()},
                    lambda n, o, p=provider, s=scenario: verify(n, o, s, p, True),
                    args.warmup,
                    args.runs,
                )
            finally:
                for client in clients.values():
                    await client.aclose()
            rows.append(_row("stream", provider, reads, samples))
            _echo(rows[-1])
    return rows


async def section_complete(url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    scenario = Scenario(20, 5)
    turns = workload.history(40, images=4)
    for provider in [p for p in args.providers if p in HISTORY_PROVIDERS]:
        clients = await _clients(provider, url)
        try:
            samples = await _alternate(
                {n: (lambda c=c: c.complete(scenario, turns)) for n, c in clients.items()},
                lambda n, o, p=provider: verify(n, o, scenario, p, False),
                args.warmup,
                args.runs * 4,
            )
        finally:
            for client in clients.values():
                await client.aclose()
        rows.append(_row("complete", provider, 0, samples))
        _echo(rows[-1])
    return rows


def section_import(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each case in a fresh interpreter, round by round; with ``--import-baseline DIR`` every
    metis case runs a second time on the ``metis`` package in DIR (an older checkout, say
    ``git archive main metis | tar -x -C DIR``), interleaved with this tree's."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as for an installed package
    trees = {"": env}
    if args.import_baseline:
        trees["baseline: "] = {**env, "PYTHONPATH": str(Path(args.import_baseline).resolve())}
    samples: dict[str, list[float]] = {}
    modules: dict[str, int] = {}
    for round_ in range(args.import_runs + 1):  # round 0 writes the bytecode
        for label, code in IMPORT_CASES.items():
            for prefix, tree_env in trees.items():
                if prefix and label == "deps + one model":
                    continue
                out = subprocess.run(
                    [sys.executable, "-c", IMPORT_PROBE.format(code=code)],
                    cwd=ROOT if not prefix else Path(tree_env["PYTHONPATH"]),
                    capture_output=True,
                    text=True,
                    env=tree_env,
                    check=True,
                ).stdout.split()
                if round_:
                    samples.setdefault(prefix + label, []).append(float(out[-2]))
                    modules[prefix + label] = int(out[-1])
    reference = statistics.median(samples["deps + one model"])
    least = min(samples["deps + one model"])
    rows = []
    for label, got in samples.items():
        cpu = statistics.median(got)
        rows.append(
            {
                "kind": "import",
                "what": label,
                "cpu_ms": cpu * 1000,
                "cpu_min_ms": min(got) * 1000,
                "ratio": cpu / reference,
                "ratio_min": min(got) / least,
                "modules": modules[label],
                "load": os.getloadavg()[0],
            }
        )
        print(
            f"import  {label:38} median {cpu * 1000:7.1f} ms {cpu / reference:5.2f}x"
            f"  min {min(got) * 1000:7.1f} ms {min(got) / least:5.2f}x",
            flush=True,
        )
    return rows


def _echo(row: dict[str, Any]) -> None:
    reads = "1 event" if not row["reads"] else f"{row['reads'] // 1024} KiB"
    print(
        f"{row['kind']:8} {row['provider']:10} {reads:8} floor {row['floor_ms']:7.2f} ms"
        f"  metis {row['metis_ms']:7.2f} ms  {row['ratio']:5.2f}x  load {row['load']:.1f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--reads", default="0,16384", help="HTTP chunk sizes; 0: one event")
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument(
        "--import-baseline", help="a directory holding an older metis package to interleave"
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    args.providers = args.providers.split(",")
    args.reads = [int(r) for r in args.reads.split(",")]
    sections = args.sections.split(",")
    warnings.simplefilter("ignore")
    rows: list[dict[str, Any]] = []
    if "stream" in sections or "complete" in sections:
        with ServerProcess() as url:

            async def served() -> None:
                if "stream" in sections:
                    rows.extend(await section_stream(url, args))
                if "complete" in sections:
                    rows.extend(await section_complete(url, args))

            anyio.run(served)
    if "import" in sections:
        rows.extend(section_import(args))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
