"""Gateway CPU per request, requests one after another: the cost of one stream with nothing
else running, split into what a request costs and what each event costs (benchmarks/README.md,
"The gateway's per-event cost").

    python -m benchmarks.gateway_probe --pace 0,20 --targets floor,metis,litellm

Each target (``metis serve``, LiteLLM's proxy, the bare proxy of ``benchmarks.gateway_floor``)
runs in a fresh process over one upstream; a client sends ``--requests`` streamed Chat
Completions requests (``t15-f3``: about 20 events) one after another and the gateway process's
own CPU time (``/proc``) is divided by them. At ``--pace 0`` the upstream writes the stream at
once (one read holds it); at ``--pace 20`` its events come 20 ms apart, each its own read and
write: the difference, over the events, is what the gateway spends per event.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import gateway as bench
from benchmarks.server import ServerProcess


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def probe(url: str, pid: int, requests: int, route: str = "same-chat") -> tuple[float, float]:
    """The gateway's CPU ms per request and the chunks the client read per request, over
    ``route`` (``benchmarks.gateway.ROUTES``; the upstream always speaks Chat)."""
    api = bench.ROUTES[route].api
    body = bench.request_body(api, bench.MODELS["chat"])
    headers = dict(header.split(": ", 1) for header in bench.HEADERS[api])
    chunks = 0
    with httpx.Client(timeout=60) as client:

        def one() -> int:
            with client.stream("POST", url + bench.PATHS[api], content=body, headers=headers) as r:
                read = sum(1 for _ in r.iter_raw())
            if r.status_code != 200:
                raise RuntimeError(f"{url} answered {r.status_code}")
            return read

        for _ in range(5):  # warm: connections, caches, first-call imports
            one()
        before = cpu_seconds(pid)
        for _ in range(requests):
            chunks += one()
        spent = cpu_seconds(pid) - before
    return spent / requests * 1000, chunks / requests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pace", default="0,20", help="ms between the upstream's events")
    parser.add_argument("--targets", default="floor,metis,litellm")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--scenario", default="t15-f3")
    parser.add_argument("--route", default="same-chat", choices=("same-chat", "translated"))
    parser.add_argument("--litellm", default=str(bench.ROOT / ".venv-litellm/bin/litellm"))
    args = parser.parse_args(argv)
    print("| target | pace ms | gateway CPU ms/request | chunks read/request | load avg |")
    print("|---|---:|---:|---:|---:|")
    with ServerProcess() as upstream, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for pace in map(int, args.pace.split(",")):
            direct = bench.upstream_base(upstream, args.scenario, pace)
            (work / "metis.yaml").write_text(
                bench.metis_config(upstream, args.scenario, True, pace)
            )
            (work / "litellm.yaml").write_text(bench.litellm_config(upstream, args.scenario, pace))
            for target in args.targets.split(","):
                if target == "litellm" and not os.path.exists(args.litellm):
                    continue
                command, url, health, environment = bench.target_serve(
                    target, work, direct, args.litellm
                )
                with bench.gateway_process(command, url, health, environment) as pid:
                    started = os.getloadavg()[0]
                    cpu, chunks = probe(url, pid, args.requests, args.route)
                    load = (started + os.getloadavg()[0]) / 2
                print(f"| {target} | {pace} | {cpu:.2f} | {chunks:.1f} | {load:.1f} |", flush=True)
                time.sleep(0.5)


if __name__ == "__main__":
    main()
