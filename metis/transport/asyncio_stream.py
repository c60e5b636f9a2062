"""The byte stream under httpcore on asyncio: an asyncio protocol and its transport, read
without a loop turn when bytes are already there.

httpcore's own asyncio stream reads through anyio's socket stream: each read enters a cancel
scope for its timeout, maps exceptions in another context manager, and yields to the loop
once before it looks at what arrived. A streamed response is read a chunk at a time, so on a
stream whose events arrive one by one those costs are paid per event, and they are most of
what the HTTP client spends on it (benchmarks/README.md, "The gateway's per-event cost").

:class:`AsyncioStream` keeps what the transport delivers in the protocol: a read takes
what is there at once and waits (one future, one timer) only when nothing is; a write hands
its bytes to the transport and waits only when the transport asked to stop. Errors are
httpcore's (``ReadTimeout``, ``ReadError``, ``WriteError``, ...), as its own stream raises them,
so httpx reports them as it always does. Trio keeps httpcore's trio stream (``connect.py``).
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections import deque
from typing import Any, cast

import httpcore

_PAUSE_AT = 256 * 1024
"""Bytes received and not yet read at which the transport stops reading from the socket."""
_RESUME_AT = 64 * 1024
"""... and below which it reads again."""


class StreamProtocol(asyncio.Protocol):
    """What the transport delivered and not yet read, and whether it ended."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.ended = False
        self.error: BaseException | None = None
        self.reader: asyncio.Future[None] | None = None
        self.writer: asyncio.Future[None] | None = None
        self.reading_paused = False
        self.writing_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > _PAUSE_AT and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        _wake(self.reader)

    def eof_received(self) -> bool:
        self.ended = True
        _wake(self.reader)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        _wake(self.reader)
        _wake(self.writer)

    async def readable(self, seconds: float | None) -> None:
        """Until bytes arrive or the connection ends; ``ReadTimeout`` after ``seconds``."""
        self.reader = asyncio.get_running_loop().create_future()
        try:
            await _until(self.reader, seconds, httpcore.ReadTimeout)
        finally:
            self.reader = None

    async def writable(self, seconds: float | None) -> None:
        """Until the transport takes bytes again or the connection ends; ``WriteTimeout``
        after ``seconds``."""
        self.writer = asyncio.get_running_loop().create_future()
        try:
            await _until(self.writer, seconds, httpcore.WriteTimeout)
        finally:
            self.writer = None

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        _wake(self.writer)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


async def _until(
    waiter: asyncio.Future[None], seconds: float | None, error: type[Exception]
) -> None:
    if seconds is None:
        await waiter
        return
    timer = asyncio.get_running_loop().call_later(seconds, _expire, waiter, error)
    try:
        await waiter
    finally:
        timer.cancel()


def _expire(waiter: asyncio.Future[None], error: type[Exception]) -> None:
    if not waiter.done():
        waiter.set_exception(error("timed out"))


class AsyncioStream(httpcore.AsyncNetworkStream):
    """httpcore's network stream over an asyncio transport (see the module)."""

    def __init__(
        self, transport: asyncio.Transport, protocol: StreamProtocol, sock: socket.socket
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._socket = sock

    @classmethod
    async def over(cls, sock: socket.socket) -> AsyncioStream:
        """The stream of a connected ``sock``, which the running loop's transport now owns."""
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(StreamProtocol, sock=sock)
        return cls(transport, protocol, sock)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        protocol = self._protocol
        chunks = protocol.chunks
        if not chunks:
            if not protocol.ended:
                await protocol.readable(timeout)
            if not chunks:
                if protocol.error is not None:
                    raise httpcore.ReadError(str(protocol.error)) from protocol.error
                return b""
        data = chunks.popleft()
        if len(data) > max_bytes:
            chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        protocol.buffered -= len(data)
        if protocol.reading_paused and protocol.buffered < _RESUME_AT:
            protocol.reading_paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        protocol = self._protocol
        if self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        while protocol.writing_paused and not protocol.ended:
            await protocol.writable(timeout)
        if protocol.error is not None:
            raise httpcore.WriteError(str(protocol.error)) from protocol.error

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                self._transport,
                self._protocol,
                ssl_context,
                server_hostname=server_hostname,
                ssl_handshake_timeout=timeout if timeout else None,
            )
        except TimeoutError as exc:
            self._transport.abort()
            raise httpcore.ConnectTimeout(str(exc) or "the TLS handshake timed out") from exc
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            self._transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # the other side closed during the handshake
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = transport
        return AsyncioStream(transport, self._protocol, self._socket)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._socket
        if info == "is_readable":
            return self._is_readable()
        return None

    def _is_readable(self) -> bool:
        """Whether the other side sent something or hung up (httpcore asks of an idle
        connection before it reuses it); the socket is asked too, for what the loop has not
        delivered yet."""
        protocol = self._protocol
        if protocol.chunks or protocol.ended or self._transport.is_closing():
            return True
        try:
            fd = self._socket.fileno()
        except OSError:
            return True
        if fd < 0:
            return True
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
