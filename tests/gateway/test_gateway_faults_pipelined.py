"""A client that sends a second request on its connection before the first is answered (HTTP/1.1
pipelining), then goes away: the request in hand is told, and its upstream call cancelled, on
each path, streamed and not (metis.gateway.http_head)."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_clients import over
from tests.gateway_fixture import GATEWAY_KEY, serving

SAID = [{"role": "user", "content": "Hi"}]
ASKED = [  # (path, body): passed through and translated, streamed and not
    ("/v1/messages", {"model": "sonnet", "max_tokens": 50, "messages": SAID, "stream": True}),
    ("/v1/messages", {"model": "flash", "max_tokens": 50, "messages": SAID, "stream": True}),
    ("/v1/chat/completions", {"model": "gpt", "messages": SAID}),
    ("/v1/responses", {"model": "flash", "input": "Hi"}),
]


class Silent:
    """A provider that never answers; it says when it was asked, and when the call was
    cancelled (its request's wait ended)."""

    def __init__(self) -> None:
        self.asked, self.closed = threading.Event(), threading.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        import anyio

        self.asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.closed.set()
        raise AssertionError("unreachable")


def request_bytes(path: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: gw\r\nx-api-key: {GATEWAY_KEY}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


@pytest.mark.parametrize(("path", "body"), ASKED, ids=["passed", "translated", "whole", "resp"])
def test_a_client_gone_with_a_request_pipelined_cancels_the_one_in_hand(
    path: str, body: dict[str, Any]
) -> None:
    """Before: uvicorn told only the latest request read (the one pipelined, never begun), so
    the request in hand waited, its upstream call running and its key's place held, until the
    server stopped."""
    upstream = Silent()
    with serving(over(Emulator(), upstream), timeout_graceful_shutdown=1) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(request_bytes(path, body) + request_bytes(path, body))
            assert upstream.asked.wait(30)
        assert upstream.closed.wait(20)  # a bound on a hang: it is at once when right
