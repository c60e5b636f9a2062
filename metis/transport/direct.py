"""Requests built from what does not change between them, and, for a client that sends them
itself (the gateway's upstream clients, made by ``metis.gateway.upstream_pool``), handed to
the client's own transport.

httpx's ``build_request`` parses the URL, merges the client's headers into the request's,
and normalizes every header twice on every request; its ``send`` then goes through its auth
flow, its redirect loop, a cookie extraction and a log line before the transport is reached.
So for a client metis made (metis/transport/stage.py ``http_client``) the URL and the merged
headers are worked out once per URL and header set, and each request is made from them with
only its body, its length and its timeouts filled in. The client's own state (its base URL,
parameters and headers, which an application may change through ``adapter.http_client()``)
is compared on each request, and what was kept is dropped when it changed; a client holding a
cookie builds each request through httpx, which adds it.

A client marked :func:`send_directly` also skips ``send``: such a request has no auth of
httpx's (the provider's auth step has signed it already), follows no redirect there
(:mod:`metis.transport.exchange` follows them itself) and, from a gateway, keeps no cookie: a
cookie one provider's answer set must not go out with the next caller's request. Its request
is handed to the transport the client would have chosen, and its cookie jar is set to keep
nothing, for the requests that still go through ``send`` (a proxy's mount, event hooks, auth
given to the client later).
"""

from __future__ import annotations

import weakref
from http.cookiejar import DefaultCookiePolicy
from typing import Any

import httpx

from metis.transport.request_body import OnceBody

MAX_KEPT = 256
"""The most URL and header sets kept per client (a gateway has one per model and API)."""

_SIZED = frozenset({"POST", "PUT", "PATCH"})
"""The methods httpx gives a ``Content-Length: 0`` when their body is empty."""


class _Built:
    """A client's requests' URLs and merged headers, by URL and header set, and the client's
    own state they were merged from."""

    def __init__(self, sends: bool) -> None:
        self.sends = sends
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


def keep_built(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Build ``client``'s requests from what it keeps of their URLs and headers (see the
    module); it still sends them through httpx."""
    if client not in _CLIENTS:
        _CLIENTS[client] = _Built(sends=False)
    return client


def send_directly(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Mark ``client`` as one whose requests are built and sent so (see the module); its
    cookie jar keeps nothing from now on."""
    client.cookies.jar.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    _CLIENTS[client] = _Built(sends=True)
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
    if found is None or (not kept.sends and client.cookies):
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
    its head; None when ``client`` must send it itself (not marked to, or with auth or event
    hooks of its own)."""
    kept = _CLIENTS.get(client)
    if kept is None or not kept.sends or client.auth is not None:
        return None
    hooks = client.event_hooks
    if hooks["request"] or hooks["response"]:
        return None
    if client.is_closed:
        raise RuntimeError("Cannot send a request, as the client has been closed.")
    transport = client._transport_for_url(request.url)
    response = await transport.handle_async_request(request)
    response.request = request
    return response
