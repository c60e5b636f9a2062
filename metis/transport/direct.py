"""Requests of the clients metis makes, built from what does not change between them and
handed to the client's own transport.

httpx's ``build_request`` parses the URL, merges the client's headers into the request's and
normalizes every header twice on every request; its ``send`` then goes through its auth flow,
its redirect loop and a cookie extraction (which parses the URL again, with or without a
``Set-Cookie``) before the transport is reached. A client metis made
(metis/transport/stage.py ``http_client``; the gateway's upstream clients,
``metis.gateway.upstream_pool``) needs none of that per request: its requests have no auth of
httpx's (the provider's auth step has signed them already) and follow no redirect there
(:mod:`metis.transport.exchange` follows them itself). So the URL and the merged headers are
worked out once per URL and header set, each request is made from them with only its body,
its length and its timeouts filled in, and it is handed to the transport the client would
have chosen. The client's own state (its base URL, parameters and headers, which an
application may change through ``adapter.http_client()``) is compared on each request, and
what was kept is dropped when it changed; a client given auth or event hooks, a URL with
user-info, or a client holding a cookie, goes through httpx as before.

A cookie an answer sets is kept as httpx keeps it (the library's clients), or, for a client
marked ``send_directly(client, keep_cookies=False)`` (a gateway's), not at all: a cookie one
provider's answer set must not go out with the next caller's request. httpx's INFO line for
each request is logged as httpx logs it.
"""

from __future__ import annotations

import logging
import weakref
from http.cookiejar import DefaultCookiePolicy
from typing import Any

import httpx

from metis.transport.request_body import OnceBody
from metis.transport.routes import Routes, choice_replaced, routes_of

MAX_KEPT = 256
"""The most URL and header sets kept per client (a gateway has one per model and API)."""

_SIZED = frozenset({"POST", "PUT", "PATCH"})
"""The methods httpx gives a ``Content-Length: 0`` when their body is empty."""


class _Built:
    """A client's requests' URLs and merged headers, by URL and header set, and the client's
    own state they were merged from."""

    def __init__(self, keep_cookies: bool, routes: Routes | None) -> None:
        self.keep_cookies = keep_cookies
        self.routes = routes
        self.kept: dict[Any, tuple[httpx.URL, httpx.Headers]] = {}
        self.state: tuple[object, object, list[Any]] | None = None

    def holds(self, client: httpx.AsyncClient) -> bool:
        """Whether what is kept was merged from the client as it is now (else it is dropped)."""
        state = self.state
        if state is not None:
            base, params, headers = state
            if (
                client.base_url is base
                and client.params is params
                and client.headers.raw == headers
            ):
                return True
            self.kept.clear()
        self.state = (client.base_url, client.params, client.headers.raw)
        return False


_CLIENTS: weakref.WeakKeyDictionary[httpx.AsyncClient, _Built] = weakref.WeakKeyDictionary()


def send_directly(client: httpx.AsyncClient, *, keep_cookies: bool = True) -> httpx.AsyncClient:
    """Mark ``client`` as one whose requests are built and sent so (see the module); with
    ``keep_cookies=False`` its cookie jar keeps nothing from now on."""
    if not keep_cookies:
        client.cookies.jar.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    _CLIENTS[client] = _Built(keep_cookies, routes_of(client))
    return client


def built(
    client: httpx.AsyncClient,
    method: str,
    url: Any,
    headers: Any,
    content: bytes | None,
    timeout: tuple[float, float, float, float],
) -> httpx.Request | None:
    """The request, made from what ``client`` keeps of its URL and headers; None for a client
    not marked, or a request not of bytes to a URL and headers given as text."""
    kept = _CLIENTS.get(client)
    if kept is None or content is None or not isinstance(url, str) or type(headers) is not dict:
        return None
    key = (method, url, *headers.items())
    found = kept.kept.get(key) if kept.holds(client) else None
    if found is None or (kept.keep_cookies and client.cookies):
        made = client.build_request(method, url, headers=headers, content=content, timeout=timeout)
        if not made.url.userinfo and not client.cookies:  # else httpx builds each (auth, cookies)
            merged = made.headers.copy()
            merged.pop("content-length", None)
            if len(kept.kept) >= MAX_KEPT:
                kept.kept.clear()
            kept.kept[key] = (made.url, merged)
        return made
    return _made(method, found[0], found[1], content, timeout)


def _made(
    method: str,
    url: httpx.URL,
    headers: httpx.Headers,
    content: bytes,
    timeout: tuple[float, float, float, float],
) -> httpx.Request:
    """The request httpx would build with these merged headers: the body's length last, the
    body as a stream (so no header is worked out again), its own copy of each part."""
    own = httpx.Headers(headers)
    if content or method in _SIZED:
        own["Content-Length"] = str(len(content))
    connect, read, write, pool = timeout
    timeouts = {"connect": connect, "read": read, "write": write, "pool": pool}
    request = httpx.Request(
        method, url, headers=own, stream=OnceBody(content), extensions={"timeout": timeouts}
    )
    request._content = content  # what read() would set, without joining the stream again
    return request


async def sent(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response | None:
    """``request`` handed to the transport ``client`` would send it with, its response with
    its head; None when ``client`` must send it itself (not marked, not made by metis (its
    routes unknown: metis/transport/routes.py), with auth or event hooks of its own, or to a
    URL with user-info, which httpx sends with basic auth)."""
    kept = _CLIENTS.get(client)
    if kept is None or client.auth is not None:
        return None
    hooks = client.event_hooks
    routes = kept.routes
    if hooks["request"] or hooks["response"] or request.url.userinfo or routes is None:
        return None
    if choice_replaced():  # respx's using="httpx": its choice is the client's to make
        return None
    if client.is_closed:
        raise RuntimeError("Cannot send a request, as the client has been closed.")
    transport: httpx.AsyncBaseTransport = routes.transport_for(request.url)
    response = await transport.handle_async_request(request)
    response.request = request
    if kept.keep_cookies and _sets_cookie(response.headers):
        client.cookies.extract_cookies(response)
    if _HTTPX_LOG.isEnabledFor(logging.INFO):
        _log(request, response)
    return response


_HTTPX_LOG = logging.getLogger("httpx")


def _sets_cookie(headers: httpx.Headers) -> bool:
    return "set-cookie" in headers or "set-cookie2" in headers


def _log(request: httpx.Request, response: httpx.Response) -> None:
    """The line httpx's client logs for each request it sends (its secrets hidden by the
    filter on its logger: metis/core/secrets.py)."""
    line = 'HTTP Request: %s %s "%s %d %s"'
    status = response.status_code
    _HTTPX_LOG.info(
        line, request.method, request.url, response.http_version, status, response.reason_phrase
    )
