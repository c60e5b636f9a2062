"""Starlette against plain ASGI for the gateway (docs/gateway.md): the CPU each spends per
request around the same handler, driven in process (no sockets, no server), so only the
framework's share is measured. Then the whole gateway per request over a model that answers
at once, streamed and not, for scale.

    python -m benchmarks.gateway_asgi [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.models import Target
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import TextBlock
from metis.model.events import MessageComplete, MessageStart, StreamEvent, TextDelta
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage

BODY = json.dumps(
    {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
).encode()
DONE = StopReason(kind=StopKind.END_TURN)


async def plain_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    received = b""
    while True:
        message = await receive()
        received += message.get("body", b"")
        if not message.get("more_body"):
            break
    reply = json.dumps({"echo": len(json.loads(received)["messages"])}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(reply)).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})


async def starlette_handler(request: Request) -> Response:
    body = json.loads(await request.body())
    return JSONResponse({"echo": len(body["messages"])})


STARLETTE = Starlette(routes=[Route("/v1/messages", starlette_handler, methods=["POST"])])


class Instant:
    """A model that answers at once: the gateway's own cost is what is left."""

    async def _events(self) -> AsyncIterator[StreamEvent]:
        yield MessageStart()
        for word in ("Hello", " there", "!"):
            yield TextDelta(0, word)
        yield MessageComplete([TextBlock(text="Hello there!")], DONE, TokenUsage(output_tokens=3))

    def stream(self, request: CanonicalRequest) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def complete(self, request: CanonicalRequest) -> CanonicalResponse:
        content = [TextBlock(text="Hello there!")]
        usage = TokenUsage(output_tokens=3)
        return CanonicalResponse(
            request_id="r",
            model="x:y",
            provider="x",
            content=content,
            stop_reason=DONE,
            usage=usage,
            latency_ms=0,
        )


def gateway_app() -> Any:
    data = {"adapters": {}, "models": {}}
    app = create_app(GatewayConfig.from_dict(data, environ={}))
    caps = AdapterCapabilities(max_output_tokens=64)
    app.state.gateway.models.resolve = lambda name: Target(name, Instant(), "x:y", caps)
    return app


async def drive(app: Any, requests: int, body: bytes) -> float:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("gw", 80),
        "scheme": "http",
        "root_path": "",
    }

    async def send(message: dict[str, Any]) -> None:
        return None

    def receiver() -> Any:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client stays connected
            return {"type": "http.disconnect"}

        return receive

    for _ in range(min(200, requests)):  # warm-up
        await app(dict(scope), receiver(), send)
    start = time.process_time()
    for _ in range(requests):
        await app(dict(scope), receiver(), send)
    return (time.process_time() - start) / requests * 1e6


async def main(requests: int) -> None:
    streamed = json.dumps({**json.loads(BODY), "stream": True}).encode()
    rows = [
        ("plain ASGI, echo handler", await drive(plain_asgi, requests, BODY)),
        ("Starlette, echo handler", await drive(STARLETTE, requests, BODY)),
        ("gateway (Starlette), Messages, whole reply", await drive(gateway_app(), requests, BODY)),
        ("gateway (Starlette), Messages, streamed", await drive(gateway_app(), requests, streamed)),
    ]
    print("| app | CPU per request (us) |\n|---|---|")
    for name, micros in rows:
        print(f"| {name} | {micros:.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=5000)
    asyncio.run(main(parser.parse_args().requests))
