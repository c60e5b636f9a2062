"""The lean transport's connect timeout, like httpx's under metis (tests/transport/test_connect.py),
counts only the connection's own wait: once the socket is connected, a plain-HTTP connection
has nothing left to wait for on the network, so an event loop that stands still past the
timeout while the connection is being set up does not fail it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from metis.transport import http1
from metis.transport.stage import http_client

from .test_connect import listener, serve_one_when

pytest.importorskip("httptools")


class StalledSetUp(http1.Http1Connection):
    """The connection's protocol, made while the event loop stands still past the timeout."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.2)  # the point: the loop stands still (4x the connect timeout below)
        super().__init__(*args, **kwargs)


def test_a_loop_stalled_after_the_socket_connected_is_no_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http1, "Http1Connection", StalledSetUp)

    async def get() -> httpx.Response:
        go = threading.Event()
        go.set()
        with listener() as sock:
            thread = serve_one_when(go, sock)
            host, port = sock.getsockname()
            async with http_client(lean=True) as client:
                assert isinstance(client._transport, http1.LeanTransport)
                timeout = httpx.Timeout(30.0, connect=0.05)
                reply = await client.get(f"http://{host}:{port}/", timeout=timeout)
                await reply.aread()
            thread.join(10)
        return reply

    reply = asyncio.run(get())
    assert reply.status_code == 200
    assert reply.content == b"ok"
