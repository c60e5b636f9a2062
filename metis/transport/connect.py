"""Opening the TCP connections of the client metis makes, with a connect timeout that counts
only the connection's own wait.

httpcore opens a connection under a wall-clock timer (``fail_after(connect_timeout)``) that
starts when the connect is asked for and must also cover every loop turn until the task that
asked runs again. A busy event loop (a gateway taking in a thousand requests at once runs
turns of seconds) can outlast the timer after the kernel had opened the connection at once:
the call fails with ``ConnectTimeout`` although the upstream answered in microseconds
(benchmarks/README.md, the 1,000-stream errors).

:class:`ConnectBackend` opens the socket itself and, when the timer runs out, asks the kernel
before giving up: a connection that is open (or refused) by then is used (or reported as
refused); only one still waiting for the other side is a timeout. The same holds for the
name's resolution (a lookup that finished is used). So a late timer never fails a
connection that did not wait, and one that is still waiting fails when the timer runs out, as
before. Addresses are tried in the resolver's order, the next one 250 ms after the last
(RFC 8305's delay) or once it failed, the first open one kept. On trio the connected socket
is httpcore's own trio stream; on asyncio it is :class:`~metis.transport.asyncio_stream
.AsyncioStream`, which reads what arrived without a loop turn.
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
import math
import os
import socket
import sys
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore

from metis.transport.httpx_private import client_transports, transport_pool

_NEXT_ADDRESS_DELAY = 0.25
"""How long one address is given before the next is tried beside it (RFC 8305)."""

Address = tuple[int, int, int, Any]
"""(family, type, proto, sockaddr), as ``getaddrinfo`` gives them."""


class ConnectBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, but for the connect timeout (see the module)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            sock = await open_socket(host, port, timeout, local_address, socket_options or ())
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        try:
            return await _stream(sock)
        except BaseException:
            sock.close()
            raise

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        trio = sys.modules.get("trio")
        default = httpcore.TrioBackend() if trio and _in_trio(trio) else httpcore.AnyIOBackend()
        return await default.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


async def open_socket(
    host: str,
    port: int,
    timeout: float | None,  # noqa: ASYNC109 (the connect timeout, as httpcore passes it)
    local_address: str | None = None,
    socket_options: Iterable[Any] = (),
) -> socket.socket:
    """A connected non-blocking TCP socket to ``host``, within ``timeout`` as the module
    counts it; ``TimeoutError`` when it is not open by then, ``OSError`` when it failed."""
    deadline = math.inf if timeout is None else anyio.current_time() + timeout
    addresses = await _resolve(host, port, deadline)
    return await _connect_any(addresses, deadline, local_address, socket_options)


def install(client: Any) -> bool:
    """Give ``client``'s connection pools (its own and those of its mounts, the proxies the
    environment names) this backend before any connection is opened; False when a pool has
    no place for one (another httpx, or an httpcore without the streams this backend hands
    back), and on Windows, where asyncio's default loop may not wait on a socket."""
    if sys.platform == "win32" or not _httpcore_streams():
        return False
    transports = client_transports(client)
    if transports is None:  # an httpx that keeps them elsewhere (metis/transport/httpx_private.py)
        return False
    pools: list[Any] = [transport_pool(transport) for transport in transports]
    if not all(hasattr(pool, "_network_backend") for pool in pools):
        return False
    backend = ConnectBackend()
    for pool in pools:
        pool._network_backend = backend
    return True


def install_on(transport: Any) -> bool:
    """:func:`install` for one transport (``httpx.AsyncHTTPTransport``) of a client."""
    pool = transport_pool(transport)
    if sys.platform == "win32" or not _httpcore_streams() or not hasattr(pool, "_network_backend"):
        return False
    pool._network_backend = ConnectBackend()  # type: ignore[union-attr]
    return True


def _httpcore_streams() -> bool:
    """Whether httpcore has the trio stream class (private to it) this backend wraps a socket
    in under trio (looked up, not imported: importing it imports trio)."""
    try:
        return importlib.util.find_spec("httpcore._backends.trio") is not None
    except ImportError:
        return False


async def _stream(sock: socket.socket) -> httpcore.AsyncNetworkStream:
    trio = sys.modules.get("trio")
    if trio is not None and _in_trio(trio):
        from httpcore._backends.trio import TrioStream

        return TrioStream(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
    from metis.transport.asyncio_stream import AsyncioStream

    return await AsyncioStream.over(sock)


def _in_trio(trio: Any) -> bool:
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


async def _resolve(host: str, port: int, deadline: float) -> list[Address]:
    """The addresses of ``host``: an IP address as it is, a name looked up in a thread; a
    lookup that has finished when the deadline passes counts."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 0, (host, port))]
    answer: list[list[Address] | OSError] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            answer.append([(info[0], info[1], info[2], info[4]) for info in infos])
        except OSError as exc:
            answer.append(exc)

    with anyio.CancelScope(deadline=deadline):
        await anyio.to_thread.run_sync(lookup, abandon_on_cancel=True)
    if not answer:
        raise TimeoutError(f"looking up {host} timed out")
    if isinstance(answer[0], OSError):
        raise answer[0]
    return answer[0]


async def _connect_any(
    addresses: list[Address],
    deadline: float,
    local_address: str | None,
    socket_options: Iterable[Any],
) -> socket.socket:
    """The first of ``addresses`` to open, each started 250 ms after the last or once it failed."""
    pending: list[socket.socket] = []
    errors: list[OSError] = []
    waiting = list(addresses)
    try:
        while waiting or pending:
            if waiting:
                try:
                    pending.append(_start(waiting.pop(0), local_address, socket_options))
                except OSError as exc:
                    errors.append(exc)
                    continue
            until = deadline
            if waiting:
                until = min(deadline, anyio.current_time() + _NEXT_ADDRESS_DELAY)
            await _wait_writable(pending, until)
            for sock in list(pending):  # the kernel's answer, however the wait ended
                state = _state(sock)
                if state is True:
                    pending.remove(sock)
                    return sock
                if isinstance(state, OSError):
                    pending.remove(sock)
                    sock.close()
                    errors.append(state)
            if pending and not waiting and anyio.current_time() >= deadline:
                raise TimeoutError("the connection was not opened in time")
        raise errors[-1] if errors else OSError("no address to connect to")
    finally:
        for sock in pending:
            sock.close()


def _start(address: Address, local_address: str | None, options: Iterable[Any]) -> socket.socket:
    family, kind, proto, sockaddr = address
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in options:
            sock.setsockopt(*option)
        if local_address is not None:
            sock.bind((local_address, 0))
        code = sock.connect_ex(sockaddr)
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            raise OSError(code, f"connect to {sockaddr}: {os.strerror(code)}")
    except BaseException:
        sock.close()
        raise
    return sock


def _state(sock: socket.socket) -> bool | OSError:
    """True once the kernel has opened ``sock``'s connection, its error once it failed, False
    while it waits for the other side."""
    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if code:
        return OSError(code, os.strerror(code))
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


async def _wait_writable(pending: list[socket.socket], until: float) -> None:
    """Until one of ``pending`` is writable (its connect ended), or ``until``."""
    with anyio.CancelScope(deadline=until):
        if len(pending) == 1:
            await anyio.wait_writable(pending[0])
            return
        async with anyio.create_task_group() as group:
            for sock in pending:
                group.start_soon(_writable_then_stop, sock, group.cancel_scope)


async def _writable_then_stop(sock: socket.socket, group: anyio.CancelScope) -> None:
    await anyio.wait_writable(sock)
    group.cancel()
