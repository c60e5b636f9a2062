"""A WebSocket connection through an HTTP proxy: an HTTP ``CONNECT`` tunnel (RFC 9110 §9.3.6)
to the server, TLS to the server inside it for ``wss://``.

Which proxy: the transport's ``proxy`` option when set, else the HTTP client's for the same
URL (:func:`client_proxy`: its ``proxy=``, and the environment's it read), else, for a client
that does not say, the environment's as httpx reads it (``HTTPS_PROXY`` for ``wss://``,
``HTTP_PROXY`` for ``ws://``, then ``ALL_PROXY``; a host ``NO_PROXY`` names goes direct), when
the client trusts the environment. The proxy is ``http://`` (or ``https://``, TLS to the proxy
itself), credentials in the URL sent as ``Proxy-Authorization: Basic``. h11 writes the
``CONNECT`` request and reads the proxy's answer; a proxy that refuses the tunnel (407, 403,
502, ...) is a :class:`~metis.transport.websocket.ConnectionLost` naming its status, never its
credentials.
"""

from __future__ import annotations

import base64
import ssl
import urllib.request
from urllib.parse import quote, unquote, urlsplit

import anyio
import anyio.abc
import h11
import httpx

from metis.transport.httpx_private import own_transport, transport_pool, url_chooser
from metis.transport.routes import routes_of

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


def client_proxy(client: object, url: str) -> str | None:
    """The proxy the HTTP client sends ``url``'s requests through (its ``proxy=`` or
    ``mounts``, and the environment's it read when it was made, ``NO_PROXY`` included), as a
    URL with the proxy's credentials; ``""`` when the client goes direct; None when the client
    does not say (not an httpx or httpx2 client, or a transport of its own there). A client
    metis made says through its routes (metis/transport/routes.py); another only through
    httpx's private choice of transport and its pool's proxy, which no public API tells."""
    parts = urlsplit(url)
    scheme = "https" if parts.scheme in ("wss", "https") else "http"
    routes = routes_of(client)
    if routes is not None:
        return routes.proxy_for(httpx.URL(parts._replace(scheme=scheme).geturl()))
    for_url = url_chooser(client)
    base_url = getattr(client, "base_url", None)
    own = own_transport(client)
    if for_url is None or base_url is None or own is None:
        return None
    transport = for_url(type(base_url)(parts._replace(scheme=scheme).geturl()))  # its package's URL
    if transport is own:
        return ""
    pool = transport_pool(transport)
    address = getattr(pool, "_proxy_url", None)
    if address is None:
        return None
    host = address.host.decode("ascii")
    port = f":{address.port}" if address.port else ""
    credentials = _basic_credentials(getattr(pool, "_proxy_headers", []))
    return f"{address.scheme.decode('ascii')}://{credentials}{host}{port}"


def _basic_credentials(headers: list[tuple[bytes, bytes]]) -> str:
    """``user:password@`` (quoted) from a ``Proxy-Authorization: Basic`` header, else ""."""
    for name, value in headers:
        kind, _, encoded = value.partition(b" ")
        if name.lower() == b"proxy-authorization" and kind.lower() == b"basic":
            user, _, password = base64.b64decode(encoded).decode("latin-1").partition(":")
            return f"{quote(user, safe='')}:{quote(password, safe='')}@"
    return ""


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
