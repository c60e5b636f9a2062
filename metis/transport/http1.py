"""A lean HTTP/1.1 transport for httpx on asyncio (docs/http-client.md, "The lean transport").

httpx's own transport (httpcore) parses every HTTP chunk with h11 and hands each one up
through its pool's and connection's generators; at a gateway's hundred paced streams that is
most of what a request costs (benchmarks/README.md, "Results, 2026-11-27 (lean)").
:class:`LeanTransport` is an ``httpx.AsyncBaseTransport`` whose connections are asyncio
protocols parsed by httptools (:mod:`metis.transport.http1_protocol`), kept per origin by
:mod:`metis.transport.http1_pool`. A response's body is handed on by what arrived (the bytes
of every chunk that came in since the last read, joined), and the transport's exchange reads
it through the ``metis_body`` extension without any generator (``LeanBody.reader``).

What it does not handle goes to the usual transport (``httpx.AsyncHTTPTransport``, made on
first need with the same TLS settings and limits): a request not on asyncio (trio), one with
httpcore's ``trace`` extension, a scheme other than http and https, one asking to switch
protocols (``Upgrade``: its 101 hands on httpcore's stream), and every request while
httpx's or httpcore's sending is mocked (:func:`mocked`: respx and pytest-httpx patch those
methods, and their mocks must see the request). The choice is made per request here.
Proxies never reach it: an ``httpx.AsyncClient`` sends a proxied URL through its mounts, the
usual transport over the proxy. HTTP/2 is the caller's choice when the client is made
(:func:`metis.transport.stage.http_client` makes a lean client only for HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

from metis.transport import connect
from metis.transport.http1_pool import Origin, Pool
from metis.transport.http1_protocol import Http1Connection

_PORTS = {"http": 80, "https": 443}
_VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}
DEFAULT_LIMITS = httpx.Limits()
"""httpx's own: 100 connections, 20 kept idle 5 s."""


class LeanBody(httpx.AsyncByteStream):
    """A lean response's body: iterated as httpx does, or read by ``reader``."""

    def __init__(self, pool: Pool, connection: Http1Connection, seconds: float | None) -> None:
        self._pool = pool
        self._connection: Http1Connection | None = connection
        self._seconds = seconds

    async def __aiter__(self) -> Any:
        connection, seconds = self._connection, self._seconds
        if connection is None:
            return
        while (chunk := await connection.read(seconds)) is not None:
            yield chunk

    def reader(
        self, seconds_for_read: Callable[[], float | None]
    ) -> Callable[[], Awaitable[bytes | None]]:
        """The body's bytes as they arrive (None at its end), each read given
        ``seconds_for_read()`` at most."""
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        read = connection.read

        async def read_within() -> bytes | None:
            return await read(seconds_for_read())

        return read_within

    def abort(self) -> None:
        """End a pending read now (another task's cancel); nothing once the body is closed
        (its connection may carry another request by then)."""
        if self._connection is not None:
            self._connection.abort("the response was aborted")

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            if connection.reusable():
                self._pool.release(connection)
            else:
                self._pool.discard(connection)


class LeanStream:
    """A lean response's ``network_stream`` extension: what its connection is, asked as
    httpcore's stream is asked (``get_extra_info``: ``ssl_object``, ``client_addr``,
    ``server_addr``, ``socket``, ``is_readable``). Unlike httpcore's it has no ``read`` or
    ``write``: the connection's bytes are the transport's (docs/http-client.md)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: Http1Connection) -> None:
        self._connection = connection

    def get_extra_info(self, info: str) -> Any:
        name = _EXTRA_INFO.get(info)
        if name is not None:
            return self._connection.extra(name)
        if info == "is_readable":
            return self._connection.is_readable()
        return None


_EXTRA_INFO = {
    "ssl_object": "ssl_object",
    "client_addr": "sockname",
    "server_addr": "peername",
    "socket": "socket",
}


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio protocols parsed by httptools (see the module)."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        limits: httpx.Limits = DEFAULT_LIMITS,
        socket_options: Iterable[Any] = (),
    ) -> None:
        if isinstance(verify, ssl.SSLContext):
            context = verify
        else:
            context = httpx.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        context.set_alpn_protocols(["http/1.1"])
        self.ssl_context = context
        self.sends_over_network = True
        self._trust_env = trust_env
        self._limits = limits
        self._socket_options = tuple(socket_options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._spare = False
        self._pool = Pool(limits)
        self._fallback: httpx.AsyncHTTPTransport | None = None

    def keep_spare(self) -> None:
        """Its pools keep a spare connection to each origin (metis.transport.http1_pool)."""
        self._spare = self._pool.spare = True

    def carries(self, request: httpx.Request) -> bool:
        """Whether this transport sends ``request`` itself, not the usual one (the module)."""
        return (
            asyncio._get_running_loop() is not None  # not trio
            and request.url.scheme in _PORTS
            and request.extensions.get("trace") is None
            and not mocked()
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        head = _head(request) if self.carries(request) else None
        if head is None:  # (or it asks to switch protocols: its 101's stream is httpcore's)
            return await self.fallback().handle_async_request(request)
        url = request.url
        scheme = url.scheme
        pool = self._pool_of(asyncio.get_running_loop())
        timeouts = request.extensions.get("timeout") or {}
        host = url.raw_host.decode("ascii")  # IDNA 2008 as httpx encodes it, not url.host
        origin = (scheme, host, url.port or _PORTS[scheme])
        connection = await pool.acquire(
            origin, timeouts.get("pool"), lambda: self._open(origin, request, timeouts)
        )
        try:
            connection.start(request)
            await _send(connection, request, head, timeouts.get("write"))
            seconds = timeouts.get("read")
            await connection.read_head(seconds)
        except BaseException:
            pool.discard(connection)
            raise
        body = LeanBody(pool, connection, seconds)
        said = connection.parser.get_http_version()
        version = _VERSIONS.get(said) or b"HTTP/" + said.encode("ascii")
        if said == "1.0":
            connection.keep_alive = False  # never reused, as httpx's transport (h11) does
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=body,
            extensions={
                "http_version": version,
                "reason_phrase": connection.reason,
                "network_stream": LeanStream(connection),
                "metis_body": body,
            },
        )

    def fallback(self) -> httpx.AsyncHTTPTransport:
        """The usual transport, for what this one does not handle (see the module)."""
        if self._fallback is None:
            self._fallback = httpx.AsyncHTTPTransport(
                verify=self.ssl_context, trust_env=self._trust_env, limits=self._limits
            )
            connect.install_on(self._fallback)
        return self._fallback

    @property
    def used_fallback(self) -> httpx.AsyncHTTPTransport | None:
        """The usual transport, once a request needed it."""
        return self._fallback

    def _pool_of(self, loop: asyncio.AbstractEventLoop) -> Pool:
        """The pool of connections opened on ``loop``: a client used from another loop (its
        connections belong to the loop that opened them) starts a pool of its own, and the
        last loop's idle connections are closed on that loop."""
        if loop is not self._loop:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._pool.close)
            self._loop = loop
            self._pool = Pool(self._limits, self._spare)
        return self._pool

    async def _open(
        self, origin: Origin, request: httpx.Request, timeouts: dict[str, Any]
    ) -> Http1Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        seconds = timeouts.get("connect")
        started = loop.time()
        try:
            sock = await connect.open_socket(host, port, seconds, None, self._socket_options)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc), request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        tls: dict[str, Any] = {}
        left = None if seconds is None else max(0.001, seconds - (loop.time() - started))
        if scheme == "https":
            hostname = request.extensions.get("sni_hostname") or host
            tls = {"ssl": self.ssl_context, "server_hostname": hostname}
            if left is not None:  # the deadline below ends it; the loop's own timer is a backstop
                tls["ssl_handshake_timeout"] = left + 1.0
        try:
            async with asyncio.timeout(left if tls else None):  # plain HTTP: no wait left
                _, connection = await loop.create_connection(Http1Connection, sock=sock, **tls)
        except TimeoutError as exc:
            sock.close()
            said = str(exc) or "the TLS handshake did not end in time"
            raise httpx.ConnectTimeout(said, request=request) from exc
        except BaseException as exc:
            sock.close()
            if not isinstance(exc, (OSError, ssl.SSLError)):
                raise
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        return connection

    async def aclose(self) -> None:
        self._pool.close()
        if self._fallback is not None:
            await self._fallback.aclose()


_SENDERS = (
    (httpx.AsyncHTTPTransport, "AsyncHTTPTransport.handle_async_request"),
    (httpcore.AsyncConnectionPool, "AsyncConnectionPool.handle_async_request"),
    (httpcore.AsyncHTTPConnection, "AsyncHTTPConnection.handle_async_request"),
)
"""The methods a mock of httpx replaces: pytest-httpx the transport's, respx (by default)
httpcore's pool's and connection's."""
_GENUINE: dict[type, Any] = {}
"""Each sender's method last seen to be its own."""


def mocked() -> bool:
    """Whether a sender's method is not its own function (see ``_SENDERS``): a mock is
    active. While nothing changed, a request costs one identity check per sender."""
    for cls, qualname in _SENDERS:
        method = cls.handle_async_request
        if method is _GENUINE.get(cls):
            continue
        if (
            not inspect.isfunction(method)
            or method.__qualname__ != qualname
            or hasattr(method, "__wrapped__")
        ):
            return True
        _GENUINE[cls] = method
    return False


def _head(request: httpx.Request) -> bytes | None:
    """The request's head; None when it asks to switch protocols (an ``Upgrade`` field)."""
    parts = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        if len(name) == 7 and name.lower() == b"upgrade":
            return None
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    head = b"".join(parts)
    lines = len(parts) // 4 + 1  # the request line, each field, the blank line: one \n each
    if head.count(b"\n") != lines or head.count(b"\r") != lines or b"\0" in head:
        raise httpx.LocalProtocolError(  # as httpx's transport refuses it: no field injected
            "a header name or value holds a line break or NUL", request=request
        )
    return head


async def _send(
    connection: Http1Connection, request: httpx.Request, head: bytes, seconds: Any
) -> None:
    """The request's head and body: one write when the body is bytes."""
    try:
        content: bytes | None = request.content
    except httpx.RequestNotRead:
        content = None
    if content is not None:
        await connection.write(head + content, seconds)
        return
    await connection.write(head, seconds)
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    async for part in request.stream:  # type: ignore[union-attr]
        if part:
            framed = b"%x\r\n%b\r\n" % (len(part), part) if chunked else part
            await connection.write(framed, seconds)
    if chunked:
        await connection.write(b"0\r\n\r\n", seconds)
