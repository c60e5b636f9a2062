"""Faults a library user meets through the lean HTTP/1.1 transport (metis/transport/http1.py),
now every asyncio client's default: each over real loopback sockets, against what httpx's own
transport does in the same case."""

from __future__ import annotations

import asyncio
import http.server
import socket
import socketserver
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from metis.transport.http1 import LeanTransport

from .loops import Runner, lean_client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


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
def test_an_answer_before_the_body_was_read_is_the_response(streamed: bool, run: Runner) -> None:
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

    run(main())


def fixed(answer: bytes, *, close: bool = False) -> Handler:
    """A server answering every request on a connection with ``answer``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await read_head(reader)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if length:
                    await reader.readexactly(length)
                writer.write(answer)
                await writer.drain()
                if close:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return handler


def test_http10_without_length_reads_to_close(run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.0 200 OK\r\n\r\nall of it"
        async with serving(fixed(answer, close=True)) as url, lean_client() as client:
            for _ in range(2):
                response = await client.get(url)
                assert response.content == b"all of it"
                assert response.http_version == "HTTP/1.0"

    run(main())


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_statuses_and_head_keep_the_connection(status: int, run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 %d X\r\nContent-Length: 5\r\n\r\n" % status
        async with serving(fixed(answer)) as url, lean_client() as client:
            for _ in range(3):
                response = await client.get(url)
                assert response.status_code == status
                assert response.content == b""

    run(main())


def test_head_reads_no_body(run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
        async with serving(fixed(answer)) as url, lean_client() as client:
            for _ in range(3):
                response = await client.head(url)
                assert response.status_code == 200
                assert response.content == b""

    run(main())


def test_both_length_and_chunked_is_a_protocol_error_or_chunked(run: Runner) -> None:
    async def main() -> None:
        answer = (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n0\r\n\r\n"
        )
        async with serving(fixed(answer)) as url, lean_client() as client:
            try:
                response = await client.get(url)
            except httpx.RemoteProtocolError:
                return
            assert response.content == b"hello"

    run(main())


@pytest.mark.parametrize("encoding", ["gzip", "zstd", "deflate"])
def test_encoded_bodies_decode(encoding: str, run: Runner) -> None:
    import gzip
    import zlib

    async def main() -> None:
        text = b"hello " * 1000
        if encoding == "gzip":
            data = gzip.compress(text)
        elif encoding == "deflate":
            data = zlib.compress(text)
        else:
            zstandard = pytest.importorskip("zstandard")
            data = zstandard.ZstdCompressor().compress(text)
        answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: %b\r\nContent-Length: %d\r\n\r\n%b" % (
            encoding.encode(),
            len(data),
            data,
        )
        async with serving(fixed(answer)) as url, lean_client() as client:
            response = await client.get(url)
            assert response.content == text
            async with client.stream("GET", url) as streamed:
                got = b"".join([part async for part in streamed.aiter_bytes()])
            assert got == text

    run(main())


def test_ipv6_literal(run: Runner) -> None:
    async def main() -> None:
        try:
            server = await asyncio.start_server(
                fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), "::1", 0
            )
        except OSError:
            pytest.skip("no IPv6 loopback")
        port = server.sockets[0].getsockname()[1]
        async with lean_client() as client:
            response = await client.get(f"http://[::1]:{port}/x")
            assert response.content == b"ok"
        server.close()

    run(main())


def test_unresolvable_name_is_connect_error(run: Runner) -> None:
    async def main() -> None:
        async with lean_client() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get("http://nowhere.invalid/x")

    run(main())


def test_many_requests_past_the_pool_limit_all_answered(run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        async with serving(fixed(answer)) as url, lean_client(max_connections=3) as client:
            responses = await asyncio.gather(*(client.get(url) for _ in range(50)))
            assert [r.content for r in responses] == [b"ok"] * 50

    run(main())


def test_two_loops_in_sequence(run: Runner) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    client = lean_client()

    async def once() -> None:
        async with serving(fixed(answer)) as url:
            response = await client.get(url)
            assert response.content == b"ok"

    for _ in range(3):
        run(once())


def test_idle_connection_closed_by_server_is_replaced(run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        async with serving(fixed(answer, close=True)) as url, lean_client() as client:
            for _ in range(5):
                response = await client.get(url)
                assert response.content == b"ok"

    run(main())


def test_break_out_of_a_stream_does_not_reuse_the_connection(run: Runner) -> None:
    async def main() -> None:
        body = b"y" * 1_000_000
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
        async with serving(fixed(answer)) as url, lean_client() as client:
            async with client.stream("GET", url) as streamed:
                async for _ in streamed.aiter_bytes():
                    break
            response = await client.get(url)
            assert response.content == body

    run(main())


def test_a_cancelled_read_does_not_reuse_the_connection(run: Runner) -> None:
    async def main() -> None:
        connections = []

        async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(writer)
            if len(connections) > 1:
                await fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")(reader, writer)
                return
            await read_head(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.write(b"-rest!")
            await writer.drain()
            await fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")(reader, writer)

        async with serving(slow) as url, lean_client() as client:

            async def partial() -> None:
                async with client.stream("GET", url) as streamed:
                    async for _ in streamed.aiter_raw():
                        await asyncio.sleep(10)

            task = asyncio.create_task(partial())
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0.5)
            response = await client.get(url)
            assert response.content == b"ok"
            assert len(connections) == 2

    run(main())


def echo_length(received: list[bytes]) -> Handler:
    """A server that reads each request's whole body (by length or chunked) into
    ``received`` and answers its size."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await read_head(reader)).lower()
                body = b""
                if b"transfer-encoding: chunked" in head:
                    while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
                        body += (await reader.readexactly(size + 2))[:-2]
                    await reader.readuntil(b"\r\n")
                else:
                    for line in head.split(b"\r\n"):
                        if line.startswith(b"content-length:"):
                            body = await reader.readexactly(int(line.split(b":")[1]))
                received.append(body)
                said = b"%d" % len(body)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(said), said))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return handler


def test_request_bodies_arrive_whole(run: Runner, tmp_path: Any) -> None:
    big = tmp_path / "upload.jsonl"
    big.write_bytes(b"z" * (30 * 1024 * 1024))

    async def main() -> None:
        received: list[bytes] = []

        async def parts() -> AsyncIterator[bytes]:
            yield b"one,"
            yield b""
            yield b"two"

        async with serving(echo_length(received)) as url, lean_client() as client:
            assert (await client.post(url, content=b"")).text == "0"
            assert (await client.post(url, content=parts())).text == "7"
            with big.open("rb") as file:
                answer = await client.post(url, files={"file": file}, data={"purpose": "batch"})
            assert int(answer.text) > 30 * 1024 * 1024
        assert received[:2] == [b"", b"one,two"]
        assert received[2].count(b"z") == 30 * 1024 * 1024
        assert b'name="purpose"' in received[2]

    run(main())


def test_a_server_that_closes_after_the_head_is_a_protocol_error(run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
        async with serving(fixed(answer, close=True)) as url, lean_client() as client:
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(url)

    run(main())


def test_a_certificate_for_another_name_is_refused(run: Runner) -> None:
    import ssl

    import trustme

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("elsewhere.example").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)

    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        server = await asyncio.start_server(fixed(answer), "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        async with server, httpx.AsyncClient(transport=LeanTransport(verify=client_context)) as c:
            with pytest.raises(httpx.ConnectError):
                await c.get(f"https://localhost:{port}/")

    run(main())


class _Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: Any) -> None:
        pass


def test_a_forked_child_uses_the_client_on_its_own_connections(run: Runner) -> None:
    import os

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    client = lean_client()

    async def get(times: int) -> None:
        for _ in range(times):
            assert (await client.get(url)).content == b"ok"

    try:
        run(get(1))  # a connection the parent keeps idle
        child = os.fork()
        if child == 0:
            code = 1
            try:
                run(get(2))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        run(get(2))
    finally:
        server.shutdown()
        server.server_close()


def test_an_international_name_is_resolved_as_httpx_encodes_it(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metis.transport import connect

    asked: list[str] = []
    really = connect.open_socket

    async def to_loopback(host: str, port: int, *rest: Any) -> socket.socket:
        asked.append(host)
        return await really("127.0.0.1", port, *rest)

    monkeypatch.setattr(connect, "open_socket", to_loopback)

    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        async with serving(fixed(answer)) as url, lean_client() as client:
            port = url.rsplit(":", 1)[1]
            assert (await client.get(f"http://faß.de:{port}/")).content == b"ok"
        assert asked == ["xn--fa-hia.de"]  # IDNA 2008, as httpx; Python's codec says fass.de

    run(main())


def test_a_head_with_bare_line_feeds_is_read_as_httpx_reads_it(run: Runner) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\nContent-Length: 2\nX-Seen: yes\n\nok"
        async with serving(fixed(answer)) as url, lean_client() as client:
            for _ in range(2):
                response = await client.get(url)
                assert (response.content, response.headers["x-seen"]) == (b"ok", "yes")

    run(main())


@pytest.mark.parametrize("coding", [b"gzip, chunked", b"identity", b"chunked, gzip"])
def test_a_transfer_coding_other_than_chunked_is_refused(run: Runner, coding: bytes) -> None:
    async def main() -> None:
        answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: %b\r\n\r\n2\r\nok\r\n0\r\n\r\n" % coding
        async with serving(fixed(answer)) as url, lean_client() as client:
            with pytest.raises(httpx.RemoteProtocolError, match="Transfer-Encoding"):
                await client.get(url)

    run(main())


def test_an_early_answer_ends_a_write_the_server_does_not_read(run: Runner) -> None:
    async def main() -> None:
        async def answer_and_wait(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            await read_head(reader)
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 3\r\n\r\nbad")
            await asyncio.sleep(30)  # reads no more of the body, and stays open

        client = httpx.AsyncClient(
            transport=LeanTransport(), timeout=httpx.Timeout(30.0, write=5.0)
        )
        async with serving(answer_and_wait) as url, client:
            # a write left waiting for the server to read would end in a WriteTimeout
            response = await client.post(url, content=b"x" * (32 * 1024 * 1024))
            assert (response.status_code, response.content) == (400, b"bad")

    run(main())
