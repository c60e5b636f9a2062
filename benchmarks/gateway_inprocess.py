"""The gateway's own CPU per request, in process: ``metis serve``'s application over the
benchmark upstream (a process of its own), driven through ASGI with no server and no client
socket, so only what the application spends is timed (``process_time``), and a profile of it.

    python -m benchmarks.gateway_inprocess --route translated --requests 400 --rounds 3
    python -m benchmarks.gateway_inprocess --route translated --profile out.prof
    python -m benchmarks.gateway_inprocess --route translated --concurrency 100 --requests 1000

The routes are ``benchmarks.gateway``'s (``translated``: Anthropic Messages in, a Chat
upstream; ``same-chat``: Chat in and upstream, passed through).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import gateway as bench
from benchmarks.server import ServerProcess


def scope_for(path: str, headers: list[str]) -> dict[str, Any]:
    raw = [tuple(h.split(": ", 1)) for h in headers]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")]
        + [(k.encode(), v.encode()) for k, v in raw],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "scheme": "http",
        "root_path": "",
    }


async def one(app: Any, scope: dict[str, Any], body: bytes, marker: bytes) -> int:
    received = bytearray()
    status = 0
    sent = False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        else:
            received.extend(message.get("body", b""))

    await app(dict(scope), receive, send)
    done.set()
    if status != 200 or marker not in received:
        raise RuntimeError(f"answered {status}: {bytes(received[-300:])!r}")
    return len(received)


async def run(args: argparse.Namespace, config: Path) -> None:
    from metis.gateway.app import create_app, frozen_for_serving
    from metis.gateway.config import GatewayConfig

    os.environ.update(bench.ENVIRONMENT)
    app = frozen_for_serving(create_app(GatewayConfig.load(str(config))))
    route = bench.ROUTES[args.route]
    model = bench.MODELS[route.upstream]
    body = bench.request_body(route.api, model)
    scope = scope_for(bench.PATHS[route.api], bench.HEADERS[route.api])
    marker = bench.MARKERS[route.api].encode()
    async with app.router.lifespan_context(app):
        for _ in range(50):
            await one(app, scope, body, marker)
        for round_ in range(args.rounds):
            profiler = cProfile.Profile(time.process_time) if args.profile else None
            start = time.process_time()
            if profiler:
                profiler.enable()
            for _ in range(args.requests // args.concurrency):
                await asyncio.gather(
                    *(one(app, scope, body, marker) for _ in range(args.concurrency))
                )
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.profile)
            done = args.requests // args.concurrency * args.concurrency
            spent = (time.process_time() - start) / done * 1000
            load = os.getloadavg()[0]
            print(f"{args.route} round {round_}: {spent:.3f} ms/request (load {load:.1f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", default="translated", choices=sorted(bench.ROUTES))
    parser.add_argument("--scenario", default=bench.SCENARIO)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
    parser.add_argument("--profile", help="write a cProfile of the last round here")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    args = parser.parse_args(argv)
    with ServerProcess() as upstream, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "metis.yaml"
        config.write_text(bench.metis_config(upstream, args.scenario))
        gc.collect()
        if args.loop == "uvloop":
            import uvloop

            uvloop.run(run(args, config))
        else:
            asyncio.run(run(args, config))


if __name__ == "__main__":
    main()
