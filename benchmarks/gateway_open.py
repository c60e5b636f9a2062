"""The gateway's added latency in an open loop: requests started at a fixed rate, not each when
the last ended, so the streams in flight are the rate times a stream's length and the latency
is what a gateway adds to each request, not the queue a closed loop builds in front of it
(benchmarks/README.md, "Results, 2026-11-26 (night)").

    python -m benchmarks.gateway_open --rate 20 --pace 250 --scenario t15-f3 --requests 600
    python -m benchmarks.gateway_open --pin --targets metis,litellm --routes same-chat,translated
    python -m benchmarks.gateway_open --targets floor,metis --routes same-chat   # beside the floor

At ``--pace 250`` a ``t15-f3`` stream (about 20 events) lasts about 5 s, so 20 requests a
second hold about 100 streams in flight. Each route runs the upstream straight, then each
gateway, at the same rate; the added latency is time to the first body byte (the gateway's
percentile minus the upstream's: what a client waits for before its first token), and the
whole stream's too. ``--pin`` runs each gateway on core 0 and the upstream and the load
generator on core 1 (``taskset``), so the gateway's wake-ups do not wait behind theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import gateway as bench
from benchmarks.gateway_report import percentile
from benchmarks.server import ServerProcess

GATEWAY_CORE, OTHERS_CORE = "0", "1"


def load(
    args: argparse.Namespace, url: str, route: bench.Route, api: str, body: Path, pid: int
) -> dict[str, Any]:
    """One cell: the load generator at ``args.rate`` against ``url``, in its own process."""
    command = [sys.executable, "-m", "benchmarks.gateway_load", "--url", url]
    command += ["--path", bench.PATHS[api], "--body", str(body), "--marker", bench.MARKERS[api]]
    command += ["--pid", str(pid), "--rate", str(args.rate), "--requests", str(args.requests)]
    command += ["--concurrency", str(args.connections), "--arrivals", args.arrivals]
    for header in bench.HEADERS[api]:
        command += ["--header", header]
    if args.pin:
        command = ["taskset", "-c", OTHERS_CORE, *command]
    before = os.getloadavg()[0]
    done = subprocess.run(command, cwd=bench.ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"load generator failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    result["load_average"] = (before + os.getloadavg()[0]) / 2
    result.update(route=route.name, api=api)
    return result


def figures(result: dict[str, Any], straight: dict[str, Any] | None) -> dict[str, float]:
    done = len(result["latencies"])
    out = {
        "requests": done,
        "errors": len(result["errors"]),
        "in_flight": result["in_flight"],
        "first_p50_ms": percentile(result["firsts"], 0.5) * 1000,
        "first_p99_ms": percentile(result["firsts"], 0.99) * 1000,
        "p50_ms": percentile(result["latencies"], 0.5) * 1000,
        "p99_ms": percentile(result["latencies"], 0.99) * 1000,
        "cpu_ms": result["server_cpu"] / done * 1000 if done else float("nan"),
        "load": result["load_average"],
        "latest_start_ms": result["latest_start_s"] * 1000,
    }
    if straight is not None:
        up = figures(straight, None)
        for name in ("first_p50_ms", "first_p99_ms", "p50_ms", "p99_ms"):
            out["added_" + name] = out[name] - up[name]
    return out


def run(args: argparse.Namespace, work: Path, upstream: str) -> dict[str, Any]:
    cells: dict[str, Any] = {}
    for route_key in args.routes:
        route = bench.ROUTES[route_key]
        direct = bench.upstream_base(upstream, args.scenario, args.pace)
        body = work / f"{route.upstream}-{route.upstream}.json"
        body.write_bytes(bench.request_body(route.upstream, bench.MODELS[route.upstream]))
        straight = load(args, direct, route, route.upstream, body, 0)
        cells[f"{route_key} upstream"] = straight
        print(f"{route_key} upstream: {figures(straight, None)}", file=sys.stderr, flush=True)
        body = work / f"{route.api}-{route.upstream}.json"
        body.write_bytes(bench.request_body(route.api, bench.MODELS[route.upstream]))
        for target in args.targets:
            if target == "floor" and route.api != route.upstream:
                continue  # the floor translates nothing
            with gateway(args, target, work, direct) as (url, pid):
                result = load(args, url, route, route.api, body, pid)
            result["upstream"] = straight
            cells[f"{route_key} {target}"] = result
            print(f"{route_key} {target}: {figures(result, straight)}", file=sys.stderr, flush=True)
    return cells


@contextlib.contextmanager
def gateway(args: argparse.Namespace, target: str, work: Path, direct: str) -> Any:
    """``target``'s gateway, started for one cell (a fresh process: no cell warms another);
    ``direct``: the upstream's base URL (the floor's)."""
    command, url, health, environment = bench.target_serve(target, work, direct, args.litellm)
    if args.pin:
        command = ["taskset", "-c", GATEWAY_CORE, *command]
    with bench.gateway_process(command, url, health, environment) as pid:
        yield url, pid


def table(cells: dict[str, Any]) -> str:
    lines = [
        "| route | target | requests | in flight | first byte p50 ms | p99 ms "
        "| added first byte p50 ms | p99 ms | added whole stream p50 ms | p99 ms "
        "| gateway CPU ms/request | errors | load avg |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, result in cells.items():
        route, target = name.split(" ")
        f = figures(result, result.get("upstream"))
        added = "— | — | — | —"
        cpu = "—"
        if "upstream" in result:
            added = (
                f"{f['added_first_p50_ms']:.2f} | {f['added_first_p99_ms']:.2f} "
                f"| {f['added_p50_ms']:.2f} | {f['added_p99_ms']:.2f}"
            )
            cpu = f"{f['cpu_ms']:.2f}"
        lines.append(
            f"| {route} | {target} | {f['requests']} | {f['in_flight']:.0f} "
            f"| {f['first_p50_ms']:.2f} | {f['first_p99_ms']:.2f} | {added} | {cpu} "
            f"| {f['errors']} | {f['load']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20.0, help="requests started per second")
    parser.add_argument("--requests", type=int, default=600, help="per cell")
    parser.add_argument("--connections", type=int, default=120, help="kept open (more if busy)")
    parser.add_argument("--routes", default="same-chat,translated")
    parser.add_argument(
        "--targets",
        default="metis,litellm",
        help="metis, litellm, floor (benchmarks.gateway_floor)",
    )
    parser.add_argument("--scenario", default="t15-f3")
    parser.add_argument("--pace", type=int, default=250, help="ms between the upstream's events")
    parser.add_argument(
        "--arrivals",
        choices=("steady", "poisson"),
        default="steady",
        help="requests evenly apart (in step with paced events) or as independent clients",
    )
    parser.add_argument("--pin", action="store_true", help="gateway on core 0, the rest on 1")
    parser.add_argument("--litellm", default=str(bench.ROOT / ".venv-litellm/bin/litellm"))
    parser.add_argument("--json", help="write every cell's samples here")
    parser.add_argument("--report-from", help="no run: the table of this --json file")
    args = parser.parse_args(argv)
    args.routes, args.targets = args.routes.split(","), args.targets.split(",")
    if args.report_from:
        cells = json.loads(Path(args.report_from).read_text())
    else:
        server = ServerProcess()
        with server as upstream, tempfile.TemporaryDirectory() as tmp:
            if args.pin:
                assert server.process is not None
                os.sched_setaffinity(server.process.pid, {int(OTHERS_CORE)})
            work = Path(tmp)
            config = bench.metis_config(upstream, args.scenario, True, args.pace)
            (work / "metis.yaml").write_text(config)
            litellm = bench.litellm_config(upstream, args.scenario, args.pace)
            (work / "litellm.yaml").write_text(litellm)
            cells = run(args, work, upstream)
        if args.json:
            Path(args.json).write_text(json.dumps(cells))
    print(table(cells))


if __name__ == "__main__":
    main()
