"""The byte stream under httpcore on asyncio (metis/transport/asyncio_stream.py), on real
loopback sockets, on asyncio's own loop and on uvloop (the gateway's, under uvicorn): what
arrived is read without a loop turn and nothing is lost or reordered however it is cut; a
read or write that cannot finish ends with httpcore's own timeout or error; TLS starts on
it; httpx's client metis makes reads through it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx
import pytest
import trustme

from metis.transport import connect
from metis.transport.asyncio_stream import AsyncioStream

from .loops import Runner


@contextlib.contextmanager
def connected() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair on loopback: (the client's non-blocking socket, the server's)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    client.setblocking(False)
    try:
        yield client, server
    finally:
        client.close()
        server.close()


async def stream_over(sock: socket.socket) -> AsyncioStream:
    return await AsyncioStream.over(sock)


async def read_all(stream: AsyncioStream, max_bytes: int = 65536) -> bytes:
    out = b""
    while chunk := await stream.read(max_bytes, timeout=5):
        out += chunk
    return out


def test_bytes_that_arrived_are_read_without_a_loop_turn(run: Runner) -> None:
    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            server.sendall(b"one")
            assert await stream.read(100, timeout=5) == b"one"  # waited for: they came later
            server.sendall(b"two")
            await asyncio.sleep(0.05)  # delivered to the protocol
            turned: list[bool] = []
            asyncio.get_running_loop().call_soon(turned.append, True)
            assert await stream.read(100, timeout=5) == b"two"
            assert turned == []  # the read did not yield to the loop
            await stream.aclose()

    run(main())


def test_a_read_smaller_than_what_arrived_loses_and_reorders_nothing(run: Runner) -> None:
    payload = bytes(range(256)) * 40

    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            server.sendall(payload)
            server.shutdown(socket.SHUT_WR)
            assert await read_all(stream, max_bytes=7) == payload
            assert await stream.read(7, timeout=5) == b""  # the end, again and again
            await stream.aclose()

    run(main())


def test_a_large_body_pauses_the_socket_reads_and_arrives_whole(run: Runner) -> None:
    payload = b"x" * (3 * 1024 * 1024)

    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)

            def send_then_close() -> None:
                server.sendall(payload)
                server.close()

            sender = threading.Thread(target=send_then_close)
            sender.start()
            for _ in range(200):  # until the protocol holds more than it may
                await asyncio.sleep(0.01)
                if stream._protocol.reading_paused:
                    break
            assert stream._protocol.reading_paused
            assert not stream._transport.is_reading()
            got = await read_all(stream)
            sender.join(10)
            assert got == payload
            await stream.aclose()

    run(main())


def test_a_read_that_gets_nothing_in_time_is_httpcore_s_read_timeout(run: Runner) -> None:
    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            with pytest.raises(httpcore.ReadTimeout):
                await stream.read(100, timeout=0.05)
            server.sendall(b"late")  # the stream still reads what comes after
            assert await stream.read(100, timeout=5) == b"late"
            await stream.aclose()

    run(main())


def test_a_cancelled_read_leaves_the_stream_readable(run: Runner) -> None:
    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            pending = asyncio.ensure_future(stream.read(100, timeout=None))
            await asyncio.sleep(0.02)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            server.sendall(b"after")
            assert await stream.read(100, timeout=5) == b"after"
            await stream.aclose()

    run(main())


def test_a_connection_reset_is_httpcore_s_read_error(run: Runner) -> None:
    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            server.close()  # with a zero linger: a reset, not an end
            with pytest.raises(httpcore.ReadError):
                await stream.read(100, timeout=5)
            with pytest.raises(httpcore.WriteError):
                await stream.write(b"more", timeout=5)

    run(main())


def test_a_write_the_other_side_never_reads_is_httpcore_s_write_timeout(run: Runner) -> None:
    async def main() -> None:
        with connected() as (client, server):
            server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stream = await stream_over(client)
            with pytest.raises(httpcore.WriteTimeout):
                for _ in range(64):  # the kernel's buffers, then the transport's, fill
                    await stream.write(b"x" * 1024 * 1024, timeout=0.1)
            stream._transport.abort()

    run(main())


def test_an_idle_connection_the_other_side_closed_is_readable(run: Runner) -> None:
    """httpcore asks an idle pooled connection this before reusing it."""

    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            assert stream.get_extra_info("is_readable") is False
            server.close()
            for _ in range(100):
                if stream.get_extra_info("is_readable"):
                    break
                await asyncio.sleep(0.01)
            assert stream.get_extra_info("is_readable") is True
            await stream.aclose()

    run(main())


def test_the_stream_names_its_socket_and_addresses(run: Runner) -> None:
    async def main() -> None:
        with connected() as (client, server):
            stream = await stream_over(client)
            assert stream.get_extra_info("socket") is client
            assert stream.get_extra_info("server_addr") == server.getsockname()
            assert stream.get_extra_info("client_addr") == server.getpeername()
            assert stream.get_extra_info("ssl_object") is None
            assert stream.get_extra_info("anything else") is None
            await stream.aclose()

    run(main())


# TLS --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@contextlib.contextmanager
def tls_echo(ca: trustme.CA) -> Iterator[tuple[str, int]]:
    """A loopback TLS server in a thread: answers each line with the same line, upper case."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with context.wrap_socket(conn, server_side=True) as secure:
                while line := secure.recv(1024):
                    secure.sendall(line.upper())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()
    finally:
        listener.close()
        thread.join(5)


def test_tls_starts_on_the_stream(run: Runner, ca: trustme.CA) -> None:
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)

    async def main() -> None:
        with tls_echo(ca) as address, contextlib.closing(socket.create_connection(address)) as sock:
            sock.setblocking(False)
            plain = await stream_over(sock)
            secure = await plain.start_tls(trusted, server_hostname="localhost", timeout=5)
            assert secure.get_extra_info("ssl_object") is not None
            await secure.write(b"hello\n", timeout=5)
            assert await secure.read(100, timeout=5) == b"HELLO\n"
            await secure.aclose()

    run(main())


def test_an_untrusted_certificate_is_httpcore_s_connect_error(run: Runner, ca: trustme.CA) -> None:
    async def main() -> None:
        with tls_echo(ca) as address, contextlib.closing(socket.create_connection(address)) as sock:
            sock.setblocking(False)
            plain = await stream_over(sock)
            with pytest.raises(httpcore.ConnectError):
                await plain.start_tls(ssl.create_default_context(), "localhost", timeout=5)

    run(main())


# Through httpx ----------------------------------------------------------------------------------


def test_the_client_metis_makes_reads_through_it_on_asyncio(run: Runner, ca: trustme.CA) -> None:
    """Plain and TLS, a pooled connection reused: a body cut in many writes arrives whole."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    body = b"".join(b"%05d\n" % n for n in range(2000))

    def answer(sock: socket.socket) -> None:
        for _ in range(2):  # two requests on one connection
            request = b""
            while b"\r\n\r\n" not in request:
                request += sock.recv(4096)
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body))
            for start in range(0, len(body), 600):
                sock.sendall(body[start : start + 600])

    def server(secure: bool) -> tuple[socket.socket, threading.Thread]:
        listener = socket.create_server(("127.0.0.1", 0))

        def serve() -> None:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                with context.wrap_socket(conn, server_side=True) if secure else conn as sock:
                    answer(sock)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        return listener, thread

    async def main(secure: bool) -> None:
        listener, thread = server(secure)
        verify = ssl.create_default_context()
        ca.configure_trust(verify)
        client = httpx.AsyncClient(verify=verify)
        assert connect.install(client)
        port = listener.getsockname()[1]
        url = f"{'https' if secure else 'http'}://127.0.0.1:{port}/"
        async with client:
            for _ in range(2):
                async with client.stream("GET", url) as reply:
                    assert isinstance(reply.extensions["network_stream"], AsyncioStream)
                    assert await reply.aread() == body
        listener.close()
        thread.join(5)

    run(main(False))
    run(main(True))


def test_tls_starts_inside_tls_as_through_an_https_proxy(run: Runner, ca: trustme.CA) -> None:
    """An HTTPS proxy's connection carries the target's TLS inside its own."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with server.wrap_socket(conn, server_side=True) as outer:
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            inner = server.wrap_bio(incoming, outgoing, server_side=True)

            def step(action: Callable[[], Any]) -> Any:
                while True:
                    try:
                        done = action()
                    except ssl.SSLWantReadError:
                        outer.sendall(outgoing.read())
                        incoming.write(outer.recv(65536))
                        continue
                    outer.sendall(outgoing.read())
                    return done

            step(inner.do_handshake)
            step(lambda: inner.write(step(lambda: inner.read(1024)).upper()))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    async def main() -> None:
        with contextlib.closing(socket.create_connection(listener.getsockname())) as sock:
            sock.setblocking(False)
            plain = await stream_over(sock)
            proxied = await plain.start_tls(trusted, "127.0.0.1", timeout=5)
            target = await proxied.start_tls(trusted, "127.0.0.1", timeout=5)
            await target.write(b"inner\n", timeout=5)
            assert await target.read(100, timeout=5) == b"INNER\n"
            await target.aclose()

    try:
        run(main())
    finally:
        listener.close()
        thread.join(5)
