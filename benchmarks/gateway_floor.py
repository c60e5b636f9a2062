"""The floor of a Python gateway on metis's serving stack: a bare ASGI proxy under uvicorn
that forwards the request's bytes to the upstream with httpx and relays the answer's bytes
as they arrive. No keys, no parsing, no model names rewritten, no usage read, no errors
shaped: what uvicorn and httpx cost before a gateway does anything
(benchmarks/README.md, "The gateway's per-event cost").

    FLOOR_UPSTREAM=http://127.0.0.1:8000/s/t15-f3 uvicorn benchmarks.gateway_floor:app
"""

from __future__ import annotations

import os
from typing import Any

import httpx

UPSTREAM_HEADERS = {"authorization": "Bearer sk-upstream", "content-type": "application/json"}
_client: list[httpx.AsyncClient] = []


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
    elif scope["path"] == "/health":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    else:
        await _relay(scope, receive, send)


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            _client.append(httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None)))
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await _client[0].aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _relay(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    client = _client[0]
    url = os.environ["FLOOR_UPSTREAM"] + scope["path"]
    request = client.build_request("POST", url, content=body, headers=UPSTREAM_HEADERS)
    response = await client.send(request, stream=True)
    try:
        content_type = response.headers.get("content-type", "application/json").encode()
        headers = [(b"content-type", content_type)]
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    finally:
        await response.aclose()
    await send({"type": "http.response.body", "body": b"", "more_body": False})
