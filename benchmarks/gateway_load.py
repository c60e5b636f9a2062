"""The load generator of the gateway benchmark (benchmarks/gateway.py), run in a process of its
own so that its CPU is neither the gateway's nor the upstream's.

    python -m benchmarks.gateway_load --url http://127.0.0.1:4000 --path /v1/messages \\
        --body body.json --concurrency 100 --requests 300 [--pid N] [--header 'k: v']

It opens ``--concurrency`` keep-alive connections, warms each with one request, then runs
``--requests`` streamed requests over them, each connection sending its next request as soon
as its last response has ended (a closed loop: that many streams are in flight at once).
With ``--rate R`` it is an open loop instead: request i starts at i / R seconds whatever the
others do (on an idle connection, or a new one when every one is busy), so the streams in
flight are R times a stream's length (Little's law; the output says the mean) and a slow
gateway gets no respite: its latency is its own, not a queue the closed loop made. The
client is a few lines of HTTP/1.1 over asyncio streams, far cheaper than the gateways it
measures. Each response must be 200 and end with the API's last event (``--marker``), or it
counts as an error. It prints one JSON object: every latency (request written to last byte,
and to first body byte), the timed phase's wall time, the errors, and the CPU seconds spent in
that phase by process ``--pid`` and its descendants (from ``/proc``), which is the gateway's
CPU per request once divided by the requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

TICKS = os.sysconf("SC_CLK_TCK")
WARM_CONNECTIONS = 20
STALE_SECONDS = 2.0
"""An open loop's connection idle longer is opened anew: uvicorn closes a keep-alive
connection idle for 5 s, and a request sent as it closes would count as the gateway's error."""


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (uvicorn's workers), from ``/proc``."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                pending += [int(child) for child in task.read_text().split()]
            except OSError:
                continue
    return found


def cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` and its descendants (the living ones)."""
    total = 0
    for each in process_tree(pid):
        try:
            stat = Path(f"/proc/{each}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


class Connection:
    def __init__(self, host: str, port: int, request: bytes, marker: bytes) -> None:
        self.host, self.port, self.request, self.marker = host, port, request, marker
        self.args = (host, port, request, marker)
        self.idle_since = 0.0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self) -> tuple[float, float]:
        """One request; (seconds to the last byte, seconds to the first body byte)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        start = time.perf_counter()
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status, headers = int(head[9:12]), head.lower()
        first, tail = await self._body(headers)
        end = self.idle_since = time.perf_counter()
        if b"connection: close" in headers:
            self.close()
        if status != 200 or self.marker not in tail:
            raise RuntimeError(f"status {status}: {tail[-200:]!r}")
        return end - start, first - start

    async def _body(self, headers: bytes) -> tuple[float, bytes]:
        assert self.reader is not None
        if b"transfer-encoding: chunked" not in headers:
            at = headers.index(b"content-length:") + len(b"content-length:")
            length = int(headers[at : headers.index(b"\r\n", at)])
            body = await self.reader.readexactly(length)
            return time.perf_counter(), body[-400:]
        first, tail = 0.0, b""
        while True:
            size = int((await self.reader.readline()).split(b";")[0], 16)
            first = first or time.perf_counter()
            if size == 0:
                await self.reader.readline()
                return first, tail
            tail = (tail + (await self.reader.readexactly(size + 2))[:-2])[-400:]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def http_request(host: str, port: int, path: str, body: bytes, headers: list[str]) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"host: {host}:{port}",
        "content-type: application/json",
        "accept: text/event-stream",
        f"content-length: {len(body)}",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def start_times(rate: float, requests: int, arrivals: str) -> list[float]:
    """When each request starts, in seconds from the first: ``steady``, ``1 / rate`` apart;
    ``poisson``, exponential gaps of mean ``1 / rate`` (seeded: every run the same), as
    independent clients arrive, so arrivals do not fall in step with the streams' events."""
    if arrivals == "steady":
        return [index / rate for index in range(requests)]
    draw, at, times = random.Random(20261128), 0.0, []
    for _ in range(requests):
        times.append(at)
        at += draw.expovariate(rate)
    return times


async def open_loop(
    connections: list[Connection], due_times: list[float]
) -> tuple[list[float], list[float], list[str], float]:
    """Requests started at ``due_times`` on the idle ``connections`` (new ones when none is
    idle); latencies, first bytes, errors, and how late the latest start was."""
    idle, template = list(connections), connections[0]
    latencies: list[float] = []
    firsts: list[float] = []
    errors: list[str] = []
    latest = 0.0

    async def one(connection: Connection) -> None:
        try:
            total, first = await connection.send()
        except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as exc:
            errors.append(str(exc)[:200])
            connection.close()
        else:
            latencies.append(total)
            firsts.append(first)
        idle.append(connection)

    started, tasks = time.perf_counter(), []
    for offset in due_times:
        due = started + offset
        if (wait := due - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
        latest = max(latest, time.perf_counter() - due)
        connection = idle.pop() if idle else Connection(*template.args)
        if time.perf_counter() - connection.idle_since > STALE_SECONDS:
            connection.close()  # sent again on a new connection (not timed)
        tasks.append(asyncio.create_task(one(connection)))
    await asyncio.gather(*tasks)
    return latencies, firsts, errors, latest


async def run(args: argparse.Namespace, body: bytes) -> dict[str, Any]:
    url = urlsplit(args.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    request = http_request(host, port, url.path + args.path, body, args.header)
    marker = args.marker.encode()
    connections = [Connection(host, port, request, marker) for _ in range(args.concurrency)]
    warming = connections[:WARM_CONNECTIONS]  # the gateway's imports, pools and caches
    warm = await asyncio.gather(*(c.send() for c in warming), return_exceptions=True)
    errors = [f"warm-up: {str(e)[:200]}" for e in warm if isinstance(e, BaseException)]
    latencies: list[float] = []
    firsts: list[float] = []
    left = args.requests

    async def worker(connection: Connection) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            try:
                total, first = await connection.send()
            except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as exc:
                errors.append(str(exc)[:200])
                connection.close()
                continue
            latencies.append(total)
            firsts.append(first)

    cpu_before = cpu_seconds(args.pid) if args.pid else 0.0
    own_before, start = time.process_time(), time.perf_counter()
    late = 0.0
    if args.rate:
        due_times = start_times(args.rate, args.requests, args.arrivals)
        latencies, firsts, failed, late = await open_loop(connections, due_times)
        errors += failed
    else:
        await asyncio.gather(*(worker(c) for c in connections))
    wall = time.perf_counter() - start
    own = time.process_time() - own_before
    cpu = cpu_seconds(args.pid) - cpu_before if args.pid else 0.0
    for connection in connections:
        connection.close()
    return {
        "latencies": latencies,
        "firsts": firsts,
        "errors": errors,
        "wall": wall,
        "server_cpu": cpu,
        "client_cpu": own,
        "rate": args.rate,
        "in_flight": sum(latencies) / wall if wall else 0.0,
        "latest_start_s": late,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--body", required=True, help="a file holding the request body")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--marker", default="", help="bytes the last of each body must hold")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--pid", type=int, default=0, help="the process whose CPU is measured")
    parser.add_argument(
        "--rate", type=float, default=0, help="requests/s, an open loop (0: closed)"
    )
    parser.add_argument(
        "--arrivals",
        choices=("steady", "poisson"),
        default="steady",
        help="open loop: requests evenly apart, or as independent clients arrive",
    )
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args, Path(args.body).read_bytes()))))


if __name__ == "__main__":
    main()
