"""The connect timeout of the client metis makes counts only the connection's own wait: an
event loop that stands still past the timeout after the kernel opened the connection does not
fail it, and a connection the other side never opens still times out."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import httpx
import pytest

from metis.transport import connect
from metis.transport.stage import http_client

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def listener(backlog: int = 16) -> Iterator[socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    try:
        yield sock
    finally:
        sock.close()


def serve_one_when(go: threading.Event, sock: socket.socket) -> threading.Thread:
    """Accept one connection once ``go`` is set and answer its request 200."""

    def serve() -> None:
        if not go.wait(30):
            return
        conn, _ = sock.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def has_waiting_connection(sock: socket.socket) -> bool:
    """Whether the kernel has opened a connection to ``sock`` that nobody accepted yet."""
    return bool(select.select([sock], [], [], 0)[0])


async def stall_once_connected(sock: socket.socket, seconds: float, go: threading.Event) -> None:
    """Hold the whole event loop for ``seconds`` as soon as the kernel opened a connection to
    ``sock``: what a turn of a loop busy with a thousand requests does to a connect."""
    while not has_waiting_connection(sock):  # looked at every turn
        await anyio.lowlevel.checkpoint()
    time.sleep(seconds)  # noqa: ASYNC251 (the point: the event loop stands still)
    go.set()


async def test_a_loop_stalled_past_the_timeout_after_the_kernel_connected_is_no_timeout() -> None:
    await stalled_after_connecting()


def test_the_same_on_uvloop() -> None:
    """The gateway's event loop (uvicorn runs on uvloop where it is installed)."""
    uvloop = pytest.importorskip("uvloop")
    uvloop.run(stalled_after_connecting())


async def stalled_after_connecting() -> None:
    go = threading.Event()
    with listener() as sock:
        thread = serve_one_when(go, sock)
        host, port = sock.getsockname()
        async with http_client() as client:
            timeout = httpx.Timeout(30.0, connect=0.05)
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(stall_once_connected, sock, 0.5, go)
                    reply = await client.get(f"http://{host}:{port}/", timeout=timeout)
        thread.join(10)
    assert reply.status_code == 200
    assert reply.content == b"ok"


async def test_a_connection_the_other_side_never_opens_still_times_out() -> None:
    with listener(backlog=0) as sock:
        host, port = sock.getsockname()
        fillers = []
        for _ in range(2):  # a full accept queue: the kernel drops the next connection's SYN
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex((host, port))
            fillers.append(filler)
        try:
            async with http_client() as client:
                timeout = httpx.Timeout(30.0, connect=0.2)
                with anyio.fail_after(30), pytest.raises(httpx.ConnectTimeout):
                    await client.get(f"http://{host}:{port}/", timeout=timeout)
        finally:
            for filler in fillers:
                filler.close()


async def test_a_refused_connection_is_a_connect_error() -> None:
    with listener() as sock:
        host, port = sock.getsockname()
    async with http_client() as client:
        with anyio.fail_after(30), pytest.raises(httpx.ConnectError) as caught:
            await client.get(f"http://{host}:{port}/")
    assert not isinstance(caught.value, httpx.ConnectTimeout)


async def test_an_address_that_does_not_answer_is_passed_by_for_the_next() -> None:
    with listener(backlog=0) as silent, listener() as answering:
        fillers = [socket.socket() for _ in range(2)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(silent.getsockname())
        family = (socket.AF_INET, socket.SOCK_STREAM, 0)
        addresses: list[connect.Address] = [
            (*family, silent.getsockname()),
            (*family, answering.getsockname()),
        ]
        try:
            with anyio.fail_after(30):
                opened = await connect._connect_any(addresses, anyio.current_time() + 20, None, ())
        finally:
            for filler in fillers:
                filler.close()
        with opened:
            assert opened.getpeername() == answering.getsockname()


async def test_a_name_is_looked_up_and_connected() -> None:
    go = threading.Event()
    go.set()
    with listener() as sock:
        thread = serve_one_when(go, sock)
        port = sock.getsockname()[1]
        async with http_client() as client:
            with anyio.fail_after(30):
                reply = await client.get(f"http://localhost:{port}/")
        thread.join(10)
    assert reply.status_code == 200


def test_the_client_metis_makes_opens_its_connections_this_way() -> None:
    """On httpx's transport, and on the lean one's (its own connections and those it hands
    httpx's transport: trio, a mocked httpx)."""
    client = http_client(lean=False)
    backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
    assert isinstance(backend, connect.ConnectBackend)
    lean = http_client()._transport
    assert lean.__class__.__name__ == "LeanTransport"
    assert isinstance(lean.fallback()._pool._network_backend, connect.ConnectBackend)  # type: ignore[attr-defined]


def test_on_windows_the_client_keeps_httpcore_s_own_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """asyncio's default loop on Windows may not wait on a socket: httpcore's backend stays,
    and the client is on httpx's transport (the lean one opens its sockets this way)."""
    monkeypatch.delenv("METIS_HTTP_TRANSPORT", raising=False)
    monkeypatch.setattr(connect.sys, "platform", "win32")
    client = http_client()
    assert isinstance(client._transport, httpx.AsyncHTTPTransport)
    backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
    assert not isinstance(backend, connect.ConnectBackend)
