"""Faults a library user meets through the lean HTTP/1.1 transport (metis/transport/http1.py),
now every asyncio client's default: each over real loopback sockets, against what httpx's own
transport does in the same case."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from metis.transport.http1 import LeanTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def lean_client(**limits: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=LeanTransport(limits=httpx.Limits(**limits)), timeout=5.0)


@asynccontextmanager
async def serving(handler: Handler, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """A loopback server running ``handler`` on each connection; yields its base URL."""
    server = await asyncio.start_server(handler, host, 0)
    port = server.sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown}:{port}"
    finally:
        server.close()


async def read_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


async def answer_early(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads the head and a little of the body, answers 413 and closes."""
    await read_head(reader)
    await reader.read(1024)
    writer.write(
        b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large"
    )
    await writer.drain()
    writer.close()


@pytest.mark.parametrize("streamed", [False, True])
def test_an_answer_before_the_body_was_read_is_the_response(streamed: bool) -> None:
    async def main() -> None:
        body = b"x" * (8 * 1024 * 1024)

        async def parts() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 65536):
                yield body[start : start + 65536]

        async with serving(answer_early) as url, lean_client() as client:
            content: Any = parts() if streamed else body
            response = await client.post(url + "/v1/files", content=content)
            assert response.status_code == 413
            assert response.content == b"too large"

    asyncio.run(main())
