"""The gateway's own CPU per request, in process: ``metis serve``'s application over the
benchmark upstream (a process of its own), driven through ASGI with no server and no client
socket, so only what the application spends is timed (``process_time``), and a profile of it.

    python -m benchmarks.gateway_inprocess --route translated --requests 400 --rounds 3
    python -m benchmarks.gateway_inprocess --route translated --profile out.prof
    python -m benchmarks.gateway_inprocess --route translated --concurrency 100 --requests 1000
    python -m benchmarks.gateway_inprocess --route same-chat --scenario t15-f3 --pace 250 \
        --rate 20 --requests 400        # as benchmarks.gateway_open: ~100 paced streams in flight

The routes are ``benchmarks.gateway``'s (``translated``: Anthropic Messages in, a Chat
upstream; ``same-chat``: Chat in and upstream, passed through).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
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


FIRST_BYTES: list[float] = []
"""Each request's CPU (``process_time``) from its arrival to its first body bytes sent: its
own alone when requests run one at a time (``--concurrency 1``, no ``--rate``)."""


async def one(app: Any, scope: dict[str, Any], body: bytes, marker: bytes) -> int:
    received = bytearray()
    status = 0
    sent = False
    done = asyncio.Event()
    arrived = time.process_time()

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
            if not received and message.get("body"):
                FIRST_BYTES.append(time.process_time() - arrived)
            received.extend(message.get("body", b""))

    await app(dict(scope), receive, send)
    done.set()
    if status != 200 or marker not in received:
        raise RuntimeError(f"answered {status}: {bytes(received[-300:])!r}")
    return len(received)


def counted_connects() -> list[None]:
    """A list that grows by one for each upstream connection the gateway opens."""
    from metis.transport import connect

    opened: list[None] = []
    open_socket = connect.open_socket  # (both transports open their sockets with it)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(None)
        return await open_socket(*args, **kwargs)

    connect.open_socket = counted  # type: ignore[assignment]
    return opened


async def closed(app: Any, scope: Any, body: bytes, marker: bytes, args: Any) -> int:
    """``args.concurrency`` requests at once, each batch when the last has ended."""
    for _ in range(args.requests // args.concurrency):
        await asyncio.gather(*(one(app, scope, body, marker) for _ in range(args.concurrency)))
    return args.requests // args.concurrency * args.concurrency


async def opened(args: Any, app: Any, scope: Any, body: bytes, marker: bytes) -> int:
    """An open loop: a request started every ``1 / args.rate`` s, whatever is in flight."""
    started = time.monotonic()
    tasks = []
    for n in range(args.requests):
        await asyncio.sleep(max(0.0, started + n / args.rate - time.monotonic()))
        tasks.append(asyncio.ensure_future(one(app, scope, body, marker)))
    await asyncio.gather(*tasks)
    return args.requests


def with_tools(body: bytes, count: int) -> bytes:
    """``body`` with its one tool repeated under other names to ``count`` tools (an agent's
    tool list); as it is when ``count`` is 1."""
    if count == 1:
        return body
    parsed = json.loads(body)
    tool = parsed["tools"][0]
    named = tool.get("function", tool)
    copies = []
    for n in range(count):
        copy = json.loads(json.dumps(tool))
        copy.get("function", copy)["name"] = f"{named['name']}_{n}"
        copies.append(copy)
    parsed["tools"] = copies
    return json.dumps(parsed).encode()


async def run(args: argparse.Namespace, config: Path) -> None:
    from metis.gateway.app import create_app, frozen_for_serving
    from metis.gateway.config import GatewayConfig

    os.environ.update(bench.ENVIRONMENT)
    app = frozen_for_serving(create_app(GatewayConfig.load(str(config))))
    route = bench.ROUTES[args.route]
    model = bench.MODELS[route.upstream]
    body = with_tools(bench.request_body(route.api, model), args.tools)
    scope = scope_for(bench.PATHS[route.api], bench.HEADERS[route.api])
    marker = bench.MARKERS[route.api].encode()
    asked = (app, scope, body, marker)
    connects = counted_connects()
    async with app.router.lifespan_context(app):
        if args.pace:  # paced streams warm up together (each lasts seconds)
            await asyncio.gather(*(one(app, scope, body, marker) for _ in range(50)))
        for _ in range(0 if args.pace else 50):
            await one(app, scope, body, marker)
        for round_ in range(args.rounds):
            profiler = cProfile.Profile(time.process_time) if args.profile else None
            opened_before = len(connects)
            FIRST_BYTES.clear()
            start = time.process_time()
            if profiler:
                profiler.enable()
            done = await (
                opened(args, app, scope, body, marker) if args.rate else closed(*asked, args)
            )
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.profile)
            spent = (time.process_time() - start) / done * 1000
            load, opened_now = os.getloadavg()[0], len(connects) - opened_before
            print(
                f"{args.route} round {round_}: {spent:.3f} ms/request (load {load:.1f}; "
                f"{opened_now} upstream connections opened)"
            )
            if args.concurrency == 1 and not args.rate:
                first = sorted(FIRST_BYTES)[len(FIRST_BYTES) // 2] * 1000
                print(f"  CPU from arrival to the first byte, median: {first:.3f} ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", default="translated", choices=sorted(bench.ROUTES))
    parser.add_argument("--scenario", default=bench.SCENARIO)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
    parser.add_argument("--pace", type=int, default=0, help="ms between the upstream's events")
    parser.add_argument("--rate", type=float, default=0.0, help="an open loop: requests a second")
    parser.add_argument("--tools", type=int, default=1, help="the request's tools (1 or more)")
    parser.add_argument("--profile", help="write a cProfile of the last round here")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="write the gateway's access lines (as metis serve does) to /dev/null",
    )
    args = parser.parse_args(argv)
    if args.access_log:
        from metis.cli.serve import access_lines

        access_lines(True).setStream(open(os.devnull, "w"))  # noqa: SIM115 (the run's life)
    with ServerProcess() as upstream, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "metis.yaml"
        config.write_text(bench.metis_config(upstream, args.scenario, True, args.pace))
        gc.collect()
        if args.loop == "uvloop":
            import uvloop

            uvloop.run(run(args, config))
        else:
            asyncio.run(run(args, config))


if __name__ == "__main__":
    main()
