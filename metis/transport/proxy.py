"""A WebSocket connection through an HTTP proxy: an HTTP ``CONNECT`` tunnel (RFC 9110 §9.3.6)
to the server, TLS to the server inside it for ``wss://``.

Which proxy: the transport's ``proxy`` option when set, else the environment's as httpx reads
it for the HTTP calls (``HTTPS_PROXY`` for ``wss://``, ``HTTP_PROXY`` for ``ws://``, then
``ALL_PROXY``; a host ``NO_PROXY`` names goes direct), when the HTTP client trusts the
environment. The proxy is ``http://`` (or ``https://``, TLS to the proxy itself), credentials
in the URL sent as ``Proxy-Authorization: Basic``. h11 writes the ``CONNECT`` request and reads
the proxy's answer; a proxy that refuses the tunnel (407, 403, 502, ...) is a
:class:`~metis.transport.websocket.ConnectionLost` naming its status, never its credentials.
"""

from __future__ import annotations

import base64
import ssl
import urllib.request
from urllib.parse import unquote, urlsplit

import anyio
import anyio.abc
import h11

MAX_PROXY_ANSWER = 1 << 16
"""The most bytes read of a proxy's answer to ``CONNECT``."""
PROXY_SCHEMES = ("http", "https")


class ProxyError(Exception):
    """The proxy could not be used or refused the tunnel."""


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``ws://`` or ``wss://``), if any."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    host = parts.hostname or ""
    if "no" in proxies and urllib.request.proxy_bypass(host):
        return None
    scheme = "https" if parts.scheme in ("wss", "https") else "http"
    return proxies.get(scheme) or proxies.get("all") or None


def proxy_name(proxy: str) -> str:
    """The proxy as an error may name it: its scheme, host and port, no credentials."""
    parts = urlsplit(proxy)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}"


async def open_tunnel(
    proxy: str, host: str, port: int, tls: ssl.SSLContext
) -> anyio.abc.ByteStream:
    """A byte stream to ``host:port`` through ``proxy``'s ``CONNECT`` tunnel (ProxyError)."""
    parts = urlsplit(proxy)
    if parts.scheme not in PROXY_SCHEMES or not parts.hostname:
        named = proxy_name(proxy)
        raise ProxyError(f"a WebSocket proxy is http:// or https://host:port, got {named}")
    secure = parts.scheme == "https"
    proxy_port = parts.port or (443 if secure else 80)
    stream: anyio.abc.ByteStream
    if secure:
        stream = await anyio.connect_tcp(
            parts.hostname, proxy_port, ssl_context=tls, tls_standard_compatible=False
        )
    else:
        stream = await anyio.connect_tcp(parts.hostname, proxy_port)
    try:
        await _connect(stream, proxy, host, port)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(stream)
        raise
    return stream


async def _connect(stream: anyio.abc.ByteStream, proxy: str, host: str, port: int) -> None:
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    headers = [("Host", authority)]
    parts = urlsplit(proxy)
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        credentials = base64.b64encode(pair.encode()).decode()
        headers.append(("Proxy-Authorization", "Basic " + credentials))
    connection = h11.Connection(h11.CLIENT)
    request = h11.Request(method="CONNECT", target=authority, headers=headers)
    await stream.send(connection.send(request) + connection.send(h11.EndOfMessage()))
    read = 0
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as exc:
            raise ProxyError(
                f"the proxy {proxy_name(proxy)} answered CONNECT badly: {exc}"
            ) from exc
        if event is h11.NEED_DATA:
            data = await _receive(stream)
            if not data:
                raise ProxyError(f"the proxy {proxy_name(proxy)} closed the connection")
            read += len(data)
            if read > MAX_PROXY_ANSWER:
                raise ProxyError(f"the proxy {proxy_name(proxy)} answered CONNECT at length")
            connection.receive_data(data)
        elif isinstance(event, h11.Response) and 200 <= event.status_code < 300:
            if connection.trailing_data[0]:
                raise ProxyError(f"the proxy {proxy_name(proxy)} sent data before the tunnel")
            return
        elif isinstance(event, h11.Response):
            reason = event.reason.decode("latin-1", "replace")
            raise ProxyError(
                f"the proxy {proxy_name(proxy)} refused the tunnel to {authority}: "
                f"HTTP {event.status_code} {reason}".rstrip()
            )
        elif not isinstance(event, h11.InformationalResponse):
            raise ProxyError(f"the proxy {proxy_name(proxy)} answered CONNECT with {event!r:.80}")


async def _receive(stream: anyio.abc.ByteStream) -> bytes:
    try:
        return await stream.receive()
    except anyio.EndOfStream:
        return b""
