"""httpx beside httpx2: the same metis calls sent with each client, under asyncio and trio.

    python -m benchmarks.http_clients                    # ~2 minutes on 2 cores
    python -m benchmarks.http_clients --runs 10 --quick  # a smoke run
    python -m benchmarks.http_clients --json out.json

The loopback server is ``benchmarks.server`` (its own process, chunked bodies sent at once, so
what is measured is client CPU). Four workloads, each with an ``httpx.AsyncClient`` and an
``httpx2.AsyncClient`` given to metis as ``http_client`` (same pool limits):

- ``metis stream``: ``Adapter.stream()`` of an Anthropic stream of many small chunks (2,000
  text deltas and a 200-fragment tool call: about 2,200 HTTP chunks), to ``message.complete``;
- ``metis whole``: ``Adapter.complete()`` of one large JSON body (one HTTP chunk, ~1 MB);
- ``client stream`` / ``client whole``: the same bodies read with the client alone
  (``aiter_bytes()`` to the end), the client's own share of the above.

CPU is ``time.process_time()`` of the client process around each call, median after warm-up,
``gc.collect()`` before each run; every (backend, client) pair runs in fresh processes,
interleaved, so no import or heap of one taxes another. Every metis call is checked: the whole
text and the parsed tool input must arrive.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import workload
from benchmarks.clients import Metis, wire_url
from benchmarks.server import ServerProcess
from benchmarks.workload import Scenario, Turn

PACKAGES = ("httpx", "httpx2")
BACKENDS = ("asyncio", "trio")
WORKLOADS = ("metis stream", "metis whole", "client stream", "client whole")


def _client(package: str, max_connections: int = 100) -> Any:
    http = __import__(package)
    limits = http.Limits(max_connections=max_connections, max_keepalive_connections=20)
    return http.AsyncClient(timeout=600, limits=limits)


class MetisOver(Metis):
    """benchmarks.clients.Metis, sending with the given package's client."""

    def __init__(self, package: str, base_url: str) -> None:
        super().__init__("anthropic", base_url)
        self.http = _client(package)


async def _measure(
    call: Callable[[], Awaitable[None]], runs: int, warmup: int
) -> tuple[list[float], list[float]]:
    """CPU ms and wall ms of each run after the warm-up."""
    cpu: list[float] = []
    wall: list[float] = []
    for index in range(warmup + runs):
        gc.collect()
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        await call()
        if index >= warmup:
            cpu.append((time.process_time() - started_cpu) * 1000)
            wall.append((time.perf_counter() - started_wall) * 1000)
    return cpu, wall


async def _child(package: str, base_url: str, runs: int, warmup: int, sizes: dict[str, int]) -> Any:
    stream_sc = Scenario(sizes["stream_deltas"], sizes["stream_deltas"] // 10)
    whole_sc = Scenario(sizes["whole_deltas"], 0)
    metis = MetisOver(package, base_url)
    expected_text = len("".join(stream_sc.words()))
    turns = [Turn("user", workload.QUESTION)]
    headers = {
        "x-api-key": "x",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    stream_body = json.dumps({"model": "m", "stream": True, "max_tokens": 1, "messages": []})
    whole_body = stream_body.replace('"stream": true', '"stream": false')

    async def metis_stream() -> None:
        outcome = await metis.stream(stream_sc)
        assert outcome.text_chars == expected_text, outcome
        assert outcome.tool_input == stream_sc.tool_input()

    async def metis_whole() -> None:
        outcome = await metis.complete(whole_sc, turns)
        assert outcome.text_chars == len("".join(whole_sc.words())), outcome

    async def read(scenario: Scenario, body: str) -> None:
        url = wire_url(base_url, "anthropic", scenario.name)
        async with metis.http.stream("POST", url, content=body, headers=headers) as response:
            assert response.status_code == 200
            async for _ in response.aiter_bytes():
                pass

    calls = {
        "metis stream": metis_stream,
        "metis whole": metis_whole,
        "client stream": lambda: read(stream_sc, stream_body),
        "client whole": lambda: read(whole_sc, whole_body),
    }
    results = {}
    for name in WORKLOADS:
        cpu, wall = await _measure(calls[name], runs, warmup)
        results[name] = {"cpu_ms": cpu, "wall_ms": wall}
    await metis.aclose()
    return results


def _run_child(args: argparse.Namespace) -> None:
    import anyio

    http = __import__(args.package)
    sizes = {"stream_deltas": args.stream_deltas, "whole_deltas": args.whole_deltas}
    results = anyio.run(
        _child, args.package, args.url, args.runs, args.warmup, sizes, backend=args.backend
    )
    print(json.dumps({"version": http.__version__, "results": results}))


def _spawn(package: str, backend: str, url: str, args: argparse.Namespace) -> Any:
    command = [
        sys.executable, "-m", "benchmarks.http_clients", "--child", package, backend,
        "--url", url, "--runs", str(args.runs), "--warmup", str(args.warmup),
        "--stream-deltas", str(args.stream_deltas), "--whole-deltas", str(args.whole_deltas),
    ]  # fmt: skip
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{package} under {backend} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(pooled: dict[tuple[str, str], Any]) -> str:
    lines = [
        "| backend | workload | client | runs | median CPU ms | p25-p75 ms | median wall ms "
        "| x httpx |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for backend in BACKENDS:
        for name in WORKLOADS:
            base = statistics.median(pooled[(backend, "httpx")][name]["cpu_ms"])
            for package in PACKAGES:
                cpu = sorted(pooled[(backend, package)][name]["cpu_ms"])
                wall = pooled[(backend, package)][name]["wall_ms"]
                q1, q3 = cpu[len(cpu) // 4], cpu[(3 * len(cpu)) // 4]
                median = statistics.median(cpu)
                lines.append(
                    f"| {backend} | {name} | {package} | {len(cpu)} | {median:.2f} "
                    f"| {q1:.2f}-{q3:.2f} | {statistics.median(wall):.2f} | {median / base:.2f} |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("PACKAGE", "BACKEND"))
    parser.add_argument("--url", default="")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2, help="per (backend, client)")
    parser.add_argument("--stream-deltas", type=int, default=2000)
    parser.add_argument("--whole-deltas", type=int, default=150_000)
    parser.add_argument("--quick", action="store_true", help="small sizes, one process each")
    parser.add_argument("--json", type=Path, help="write the raw runs here")
    args = parser.parse_args(argv)
    if args.child:
        args.package, args.backend = args.child
        _run_child(args)
        return
    if args.quick:
        args.processes, args.stream_deltas, args.whole_deltas = 1, 200, 5000
    pooled: dict[tuple[str, str], Any] = {}
    versions: dict[str, str] = {}
    with ServerProcess() as url:
        for _ in range(args.processes):
            for backend in BACKENDS:
                for package in PACKAGES:
                    out = _spawn(package, backend, url, args)
                    versions[package] = out["version"]
                    into = pooled.setdefault((backend, package), {})
                    for name, runs in out["results"].items():
                        slot = into.setdefault(name, {"cpu_ms": [], "wall_ms": []})
                        slot["cpu_ms"] += runs["cpu_ms"]
                        slot["wall_ms"] += runs["wall_ms"]
    print(", ".join(f"{name} {version}" for name, version in versions.items()))
    print(_table(pooled))
    if args.json:
        raw = {f"{b}/{p}": runs for (b, p), runs in pooled.items()}
        args.json.write_text(json.dumps({"versions": versions, "runs": raw}, indent=1))


if __name__ == "__main__":
    main()
