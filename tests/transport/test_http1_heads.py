"""The lean HTTP/1.1 transport (metis/transport/http1.py) given heads a server should not
send, or should not send so: trailer fields after a chunked body, and a head that never ends.
Over real loopback sockets, on asyncio's own loop and on uvloop."""

from __future__ import annotations

import httpx
import pytest

from metis.transport.http1_protocol import MAX_HEAD_BYTES

from ..fault_proxy import HANG, chunked_head
from .loops import Runner
from .test_http1 import OK, proxied


def test_trailer_fields_are_not_taken_for_the_heads(run: Runner) -> None:
    async def main() -> None:
        trailers = b"0\r\ncontent-type: text/html\r\nx-checksum: 1\r\n\r\n"
        first = [chunked_head() + b"3;name=value\r\nabc\r\n" + trailers]
        async with proxied(first, [OK]) as (proxy, client):
            answer = await client.get(proxy.url)
            assert answer.content == b"abc"
            assert answer.headers["content-type"] == "text/event-stream"
            assert "x-checksum" not in answer.headers
            assert (await client.get(proxy.url)).json() == {"ok": True}
            assert proxy.connections == 1  # read to its end: the connection carries the next

    run(main())


@pytest.mark.parametrize("shape", ["one long field", "many fields"])
def test_a_head_past_the_limit_is_a_protocol_error_not_held(run: Runner, shape: str) -> None:
    async def main() -> None:
        if shape == "one long field":
            head = b"HTTP/1.1 200 X\r\nx-long: " + b"a" * (MAX_HEAD_BYTES + 1)
        else:
            head = b"HTTP/1.1 200 X\r\n" + b"x-many: 1\r\n" * (MAX_HEAD_BYTES // 11 + 1)
        async with proxied([head, HANG], [OK]) as (proxy, client):
            with pytest.raises(httpx.RemoteProtocolError, match="longer than"):
                await client.get(proxy.url)
            assert (await client.get(proxy.url)).json() == {"ok": True}
            assert proxy.connections == 2

    run(main())


def test_a_head_under_the_limit_with_a_long_body_in_the_same_read(run: Runner) -> None:
    async def main() -> None:
        body = b"x" * (2 * MAX_HEAD_BYTES)
        head = b"HTTP/1.1 200 X\r\ncontent-length: %d\r\n\r\n" % len(body)
        async with proxied([head + body]) as (proxy, client):
            assert (await client.get(proxy.url)).content == body

    run(main())


@pytest.mark.parametrize(
    "headers",
    [
        {"x-a": "v\r\nx-injected: 1"},
        {"x-a": "v\nx-injected: 1"},
        {"x-a\r\nx-injected": "1"},
        {"x-a": "v\rx"},
        {"x-a": "v\x00x"},
    ],
)
def test_a_header_with_a_line_break_is_refused_never_sent(
    run: Runner, headers: dict[str, str]
) -> None:
    async def main() -> None:
        async with proxied([OK]) as (proxy, client):
            with pytest.raises(httpx.LocalProtocolError, match="header"):
                await client.get(proxy.url, headers=headers)
            assert (await client.get(proxy.url)).json() == {"ok": True}
            assert [sorted(seen.headers) for seen in proxy.requests] == [
                ["accept", "accept-encoding", "connection", "host", "user-agent"]
            ]

    run(main())
