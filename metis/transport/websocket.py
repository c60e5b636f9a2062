"""One client WebSocket connection: wsproto (sans-IO) over an anyio TCP or TLS stream.

wsproto does the handshake and every frame (masking, fragments, control frames, the closing
handshake); this module only moves its bytes and hands back whole text messages. Every wait is
bounded by the caller: :meth:`WebSocket.connect` by a deadline, :meth:`WebSocket.receive` by the
deadline the caller gives each read, in a cancel scope (the caller's ``call.cancel.guard``).

A failure of the connection itself (refused, reset, closed, a protocol violation) is a
:class:`ConnectionLost`; a message longer than :data:`MAX_MESSAGE` a ProtocolError; a server
that answers the upgrade with anything but ``101`` is a :class:`UpgradeRefused`, carrying the
HTTP answer (status, headers, body) as it came.
"""

from __future__ import annotations

import contextlib
import ssl
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from metis.errors import ProtocolError
from metis.transport.proxy import ProxyError, open_tunnel, proxy_name
from metis.wire.framing.sse import MAX_LINE_LENGTH

READ_SIZE = 1 << 16
MAX_MESSAGE = MAX_LINE_LENGTH
"""The longest message held, in characters: one event, as long as an event-stream line may be."""
MAX_REJECT_BODY = 1 << 20
HOP_HEADERS = frozenset(
    {
        "host",
        "connection",
        "upgrade",
        "content-length",
        "content-type",
        "transfer-encoding",
        "accept-encoding",
        "accept",
        "keep-alive",
    }
)
"""Headers of an HTTP request that a WebSocket upgrade does not carry (wsproto sets its own)."""


class ConnectionLost(Exception):
    """The connection failed, closed or broke the protocol."""


class UpgradeRefused(Exception):
    """The server answered the upgrade request with an HTTP response, not ``101``."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.headers, self.body = status, headers, body


def websocket_url(url: str) -> str:
    """An ``http(s)`` URL as the ``ws(s)`` URL of the same endpoint."""
    parts = urlsplit(url)
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    return parts._replace(scheme=scheme).geturl()


_TLS: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """The system's default TLS context, made once (loading the CA store is costly)."""
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context()
    return _TLS


@dataclass(slots=True, eq=False)
class WebSocket:
    """An open client connection: ``send_text``, ``receive`` whole text messages, ``aclose``."""

    stream: anyio.abc.ByteStream
    protocol: WSConnection
    headers: dict[str, str]
    """The upgrade answer's headers."""
    opened_at: float
    messages: deque[str] = field(default_factory=deque)
    _partial: list[str] = field(default_factory=list)
    _partial_length: int = 0
    closed: bool = False
    bytes_sent: int = 0
    """Every byte written: the upgrade request, then the frames."""
    close_said: str = ""
    """The server's close code and reason, as it sent them (``" (1011: internal error)"``)."""

    @classmethod
    async def connect(
        cls,
        url: str,
        headers: dict[str, str],
        tls: ssl.SSLContext | None = None,
        proxy: str | None = None,
    ) -> WebSocket:
        """Open ``url`` (``ws://`` or ``wss://``), through ``proxy``'s CONNECT tunnel if given
        (:mod:`.proxy`), and complete the upgrade (in the caller's cancel scope):
        UpgradeRefused, ConnectionLost."""
        parts = urlsplit(url)
        secure = parts.scheme == "wss"
        host = parts.hostname or ""
        port = parts.port or (443 if secure else 80)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        extra = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in headers.items()
            if name.lower() not in HOP_HEADERS and not name.lower().startswith("sec-websocket-")
        ]
        authority = host if parts.port is None else f"{host}:{port}"
        try:
            stream = await _open_stream(host, port, secure, tls or tls_context(), proxy)
        except ProxyError as exc:
            raise ConnectionLost(str(exc)) from exc
        except ssl.SSLCertVerificationError as exc:
            via = f" (through {proxy_name(proxy)})" if proxy else ""
            raise ConnectionLost(
                f"the TLS certificate of {authority}{via} is not trusted: {exc.verify_message}"
            ) from exc
        except (OSError, anyio.BrokenResourceError, ssl.SSLError) as exc:
            via = f" through {proxy_name(proxy)}" if proxy else ""
            raise ConnectionLost(f"could not connect to {authority}{via}: {exc!r}") from exc
        try:
            return await cls._upgrade(stream, authority, target, extra)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.aclose_forcefully(stream)
            raise

    @classmethod
    async def _upgrade(
        cls,
        stream: anyio.abc.ByteStream,
        authority: str,
        target: str,
        extra: list[tuple[bytes, bytes]],
    ) -> WebSocket:
        protocol = WSConnection(ConnectionType.CLIENT)
        head = protocol.send(Request(host=authority, target=target, extra_headers=extra))
        await _write(stream, head)
        refused: RejectConnection | None = None
        body = bytearray()
        while True:
            data = await _read(stream)
            if data is None:
                raise ConnectionLost("the server closed the connection during the upgrade")
            protocol.receive_data(data)
            for event in protocol.events():
                if isinstance(event, AcceptConnection):
                    found = {
                        k.decode("latin-1").lower(): v.decode("latin-1")
                        for k, v in event.extra_headers
                    }
                    return cls(stream, protocol, found, anyio.current_time(), bytes_sent=len(head))
                if isinstance(event, RejectConnection):
                    refused = event
                    if not event.has_body:
                        raise _refusal(event, b"")
                elif isinstance(event, RejectData) and refused is not None:
                    body += event.data
                    if event.body_finished or len(body) >= MAX_REJECT_BODY:
                        raise _refusal(refused, bytes(body[:MAX_REJECT_BODY]))

    async def send_text(self, text: str) -> None:
        """Send one text message (ConnectionLost when the connection is gone)."""
        if self.closed:
            raise ConnectionLost("the connection is closed")
        try:
            data = self.protocol.send(TextMessage(data=text))
        except LocalProtocolError as exc:
            raise ConnectionLost(f"the connection is closing: {exc}") from exc
        self.bytes_sent += len(data)
        try:
            await _write(self.stream, data)
        except BaseException:
            # Part of the frame may be out: nothing can follow it, not even a close frame
            # (which would wait on a peer that stopped reading, and break the protocol).
            self.closed = True
            raise

    async def receive(self) -> str:
        """The next whole text message; waits as long as the caller's cancel scope lets it.
        Pings are answered; a close from the server is answered, then ConnectionLost."""
        while not self.messages:
            if self.closed:
                raise ConnectionLost(f"the server closed the connection{self.close_said}")
            data = await _read(self.stream)
            if data is None:
                self.closed = True
                raise ConnectionLost("the server closed the connection")
            self.protocol.receive_data(data)
            await self._take_events()
        return self.messages.popleft()

    async def _take_events(self) -> None:
        try:
            for event in self.protocol.events():
                if isinstance(event, TextMessage):
                    self._hold(event.data)
                    if event.message_finished:
                        self.messages.append("".join(self._partial))
                        self._partial.clear()
                        self._partial_length = 0
                elif isinstance(event, Ping):
                    await _write(self.stream, self.protocol.send(event.response()))
                elif isinstance(event, CloseConnection):
                    broken = self.protocol.state is ConnectionState.OPEN  # wsproto's close
                    self.closed = True
                    said = f"{int(event.code)}: {event.reason}" if event.reason else int(event.code)
                    self.close_said = f" ({said})"
                    reply = self.protocol.send(event.response())
                    with anyio.CancelScope(shield=True), _quiet():
                        await _write(self.stream, reply)
                    if broken:
                        raise _broken(event)
                elif isinstance(event, BytesMessage):
                    raise ConnectionLost("the server sent a binary message")
        except RemoteProtocolError as exc:
            self.closed = True
            raise ConnectionLost(f"the server broke the WebSocket protocol: {exc}") from exc

    def _hold(self, text: str) -> None:
        """A piece of the message arriving; past :data:`MAX_MESSAGE` characters a
        ProtocolError, and the connection is done (the rest of the message cannot be skipped)."""
        self._partial.append(text)
        self._partial_length += len(text)
        if self._partial_length > MAX_MESSAGE:
            self.closed = True
            self._partial.clear()
            raise ProtocolError(
                f"the server sent a WebSocket message longer than {MAX_MESSAGE >> 20} MiB"
            )

    async def aclose(self) -> None:
        """Close politely when the connection is still open, then drop it; never raises."""
        with anyio.CancelScope(shield=True):
            if not self.closed:
                self.closed = True
                with anyio.move_on_after(1.0), _quiet():
                    await _write(self.stream, self.protocol.send(CloseConnection(code=1000)))
            await anyio.aclose_forcefully(self.stream)


async def _open_stream(
    host: str, port: int, secure: bool, tls: ssl.SSLContext, proxy: str | None
) -> anyio.abc.ByteStream:
    """A TCP (or TLS, for ``wss``) stream to ``host:port``, direct or through ``proxy``."""
    stream: anyio.abc.ByteStream
    if proxy is None:
        stream = await anyio.connect_tcp(host, port)
    else:
        stream = await open_tunnel(proxy, host, port, tls)
    if not secure:
        return stream
    try:
        # The upgrade is HTTP/1.1; the context of an HTTP client with http2 also offers h2
        # (httpcore sets the ALPN protocols on it before each of its own connections).
        tls.set_alpn_protocols(["http/1.1"])
        return await TLSStream.wrap(
            stream, hostname=host, ssl_context=tls, standard_compatible=False
        )
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(stream)
        raise


def _quiet() -> contextlib.suppress:
    """Suppress the connection's own failures (closing a connection that is already gone)."""
    return contextlib.suppress(ConnectionLost, LocalProtocolError)


async def _read(stream: anyio.abc.ByteStream) -> bytes | None:
    """The next bytes, or None at the end of the stream."""
    try:
        return await stream.receive(READ_SIZE)
    except anyio.EndOfStream:
        return None
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError) as exc:
        raise ConnectionLost(f"the connection failed: {exc!r}") from exc


async def _write(stream: anyio.abc.ByteStream, data: bytes) -> None:
    try:
        await stream.send(data)
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError) as exc:
        raise ConnectionLost(f"the connection failed: {exc!r}") from exc


def _broken(event: CloseConnection) -> Exception:
    """What wsproto found wrong in the server's frames (it closes the connection for it): text
    that is not UTF-8 a ProtocolError, as it is over HTTP; any other violation ConnectionLost."""
    if event.code == CloseReason.INVALID_FRAME_PAYLOAD_DATA:
        return ProtocolError(f"the server sent WebSocket text that is not UTF-8: {event.reason}")
    return ConnectionLost(f"the server broke the WebSocket protocol: {event.reason}")


def _refusal(event: RejectConnection, body: bytes) -> UpgradeRefused:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
    return UpgradeRefused(event.status_code, headers, body)
