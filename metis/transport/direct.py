"""Requests of a client that sends them itself (the gateway's upstream clients, made by
``metis.gateway.upstream_pool``): built from what does not change between them, and handed
to the client's own transport.

httpx's ``build_request`` parses the URL and merges the client's headers into the request's
on every request, and its ``send`` then goes through its auth flow, its redirect loop, a
cookie extraction and a log line before the transport is reached, none of which such a
request uses: it has no auth of httpx's (the provider's auth step has signed it already),
follows no redirect there (:mod:`metis.transport.exchange` follows them itself) and, from a
gateway, keeps no cookie: a cookie one provider's answer set must not go out with the next
caller's request. So for such a client the URL and the merged headers are worked out once
per URL and header set, a request is made from them with only its body and timeouts filled
in, and it is handed to the transport the client would have chosen; the client's cookie jar
is also set to keep nothing, for the requests that still go through ``send`` (a proxy's
mount, event hooks, auth given to the client later).
"""

from __future__ import annotations

import weakref
from http.cookiejar import DefaultCookiePolicy
from typing import Any

import httpx

MAX_KEPT = 256
"""The most URL and header sets kept per client (a gateway has one per model and API)."""


class _Built:
    """A client's requests' URLs and merged headers, by URL and header set."""

    def __init__(self) -> None:
        self.kept: dict[Any, tuple[httpx.URL, httpx.Headers]] = {}


_CLIENTS: weakref.WeakKeyDictionary[httpx.AsyncClient, _Built] = weakref.WeakKeyDictionary()


def send_directly(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """Mark ``client`` as one whose requests are built and sent so (see the module); its
    cookie jar keeps nothing from now on."""
    client.cookies.jar.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    _CLIENTS[client] = _Built()
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
    found = kept.kept.get(key)
    if found is None:  # built by httpx; what does not change kept for the next
        made = client.build_request(method, url, headers=headers, content=content, timeout=timeout)
        if not made.url.userinfo and not client.cookies:  # else httpx builds each (auth, cookies)
            merged = made.headers.copy()
            merged.pop("content-length", None)
            if len(kept.kept) >= MAX_KEPT:
                kept.kept.clear()
            kept.kept[key] = (made.url, merged)
        return made
    connect, read, write, pool = timeout
    timeouts = {"connect": connect, "read": read, "write": write, "pool": pool}
    return httpx.Request(
        method, found[0], headers=found[1], content=content, extensions={"timeout": timeouts}
    )


async def sent(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response | None:
    """``request`` handed to the transport ``client`` would send it with, its response with
    its head; None when ``client`` must send it itself (not marked, or with auth or event
    hooks of its own)."""
    if client not in _CLIENTS or client.auth is not None:
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
