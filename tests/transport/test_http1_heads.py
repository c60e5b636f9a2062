"""The lean HTTP/1.1 transport (metis/transport/http1.py) given heads a server should not
send, or should not send so: trailer fields after a chunked body, and a head that never ends.
Over real loopback sockets, on asyncio's own loop and on uvloop."""

from __future__ import annotations

import httpx
import pytest

from metis.transport.http1_protocol import MAX_HEAD_BYTES

from ..fault_proxy import HANG, chunked_head
from .loops import Runner
from .replies import REPLIES
from .test_http1 import OK, proxied

LARGEST_READ = 256 * 1024  # asyncio's and uvloop's


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


@pytest.mark.parametrize("shape", ["trailer field", "chunk extension", "chunk size zeros"])
def test_framing_past_the_limit_after_the_head_is_a_protocol_error_not_held(
    run: Runner, shape: str
) -> None:
    # A trailer that never ended was held whole (httptools gathers a field's value: 32 MiB of
    # it cost 70 MB), and an endless chunk extension or size line was read until the server
    # stopped; httpx's transport refuses each past its 100 KiB, as the lean one does a head.
    # (Counted from the first read after the head's.)
    endless = b"a" * (LARGEST_READ + 2 * MAX_HEAD_BYTES)  # past the head's read, however long
    framing = {
        "trailer field": b"5\r\nhello\r\n0\r\nx-t: " + endless,
        "chunk extension": b"5\r\nhello\r\n5;a=" + endless,
        "chunk size zeros": b"5\r\nhello\r\n" + b"0" * len(endless),
    }[shape]

    async def main() -> None:
        async with proxied([chunked_head() + framing, HANG], [OK]) as (proxy, client):
            async with client.stream("GET", proxy.url) as answer:
                reads = answer.aiter_raw()
                assert await anext(reads) == b"hello"  # what came before it is handed on
                with pytest.raises(httpx.RemoteProtocolError, match="100 KiB"):
                    await anext(reads)
            assert (await client.get(proxy.url)).json() == {"ok": True}
            assert proxy.connections == 2

    run(main())


def test_chunks_far_past_the_limit_in_all_read_whole(run: Runner) -> None:
    async def main() -> None:
        chunks = b"".join(b"3;n=v\r\nabc\r\n" for _ in range(MAX_HEAD_BYTES // 4))
        reply = chunked_head() + chunks + b"0\r\nx-t: 1\r\n\r\n"
        async with proxied([reply]) as (proxy, client):
            assert (await client.get(proxy.url)).content == b"abc" * (MAX_HEAD_BYTES // 4)

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


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=["one head", "after an interim answer"],
)
def test_a_reason_phrase_split_between_reads_is_read_whole(answer: bytes) -> None:
    # httptools hands on a status line's reason in the pieces that arrived: the last one was
    # kept ('Unavailable', 'ice Unavailable', '').
    from metis.transport.http1_protocol import Http1Connection

    for cut in range(1, len(answer)):
        connection = Http1Connection()
        connection.start(httpx.Request("GET", "http://example.test/"))
        connection.data_received(answer[:cut])
        connection.data_received(answer[cut:])
        assert (connection.status, connection.reason) == (503, b"Service Unavailable"), cut


def _read(pieces: list[bytes], method: str) -> tuple[object, ...]:
    from metis.transport.http1_protocol import Http1Connection

    connection = Http1Connection()
    connection.start(httpx.Request(method, "http://example.test/"))
    for piece in pieces:
        connection.data_received(piece)
    failed = connection.error is not None and not connection.complete  # (bytes past its end)
    return (
        connection.head and (connection.status, connection.reason, connection.headers),
        b"".join(connection.body),
        connection.complete,
        failed and type(connection.error).__name__,
    )


@pytest.mark.parametrize("name", list(REPLIES))
def test_each_reply_split_at_any_byte_reads_as_it_does_whole(name: str) -> None:
    # A head that httptools refuses and h11 reads (a field with a control character, a list
    # of one length) failed when a read ended inside it: at the CR of a line whose LF had not
    # come, or inside the length's list.
    answer = REPLIES[name]
    whole = b"".join(answer.pieces)
    expected = _read([whole], answer.method)
    for cut in range(1, min(len(whole), 400)):
        assert _read([whole[:cut], whole[cut:]], answer.method) == expected, cut
    # A refused head whose end came over more than two reads was never parsed again: no
    # answer, no error, until the server closed or the read timed out.
    bytewise = [whole[n : n + 1] for n in range(len(whole))]
    assert _read(bytewise, answer.method) == expected
