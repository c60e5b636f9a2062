"""The connection pool of the client metis makes, and where its calls wait for a connection.

An adapter (or a Registry) given no client makes one (:func:`metis.transport.stage.http_client`)
with the official SDKs' pool: up to ``MAX_CONNECTIONS`` connections, ``MAX_KEEPALIVE`` of them
kept idle. httpx's own default (100 and 20) queues every call past the hundredth inside
httpcore, and httpcore 1.0 scans its whole queue and pool on every request, response and
cancel (``AsyncConnectionPool._assign_requests_to_connections``): with 600 streams that work
keeps the event loop busy for tens of seconds, so no deadline fires on time
(docs/http-client.md has the measurements).

So a call never queues there: each request of such a client first takes one of its
connection slots, as many as the pool has connections, and holds it until its response is
closed. The wait for a slot is one semaphore wait, done by the transport inside the call's
cancel and deadline like every other wait; httpcore then always finds a connection free or
room for a new one. A client the application gives has no slots: its pool is the
application's to size (httpx2's pool does not have that scan). A request that metis's lean
transport carries itself (metis/transport/http1.py) takes no slot either: its pool queues
without a scan; one the lean transport hands to httpx's (trio, a proxy, a mocked httpx) does.
"""

from __future__ import annotations

import weakref
from typing import Any

import anyio
from anyio.lowlevel import RunVar

from metis.transport.httpx_private import client_transports, transport_pool
from metis.transport.routes import Routes, registered

MAX_CONNECTIONS = 1000
"""Connections of the pool metis makes (the official SDKs' limit)."""
MAX_KEEPALIVE = 100
"""Idle connections it keeps (the official SDKs' limit)."""

_SIZES: weakref.WeakKeyDictionary[Any, tuple[int, Routes | None]] = weakref.WeakKeyDictionary()
"""The clients metis made, with their number of connection slots."""
_SLOTS: RunVar[weakref.WeakKeyDictionary[Any, anyio.Semaphore]] = RunVar("metis_connection_slots")
"""Per event loop (a client's connections belong to the loop that opened them): each client's
semaphore."""


def give_slots(client: Any, size: int) -> None:
    """Make every request of ``client`` wait for one of ``size`` slots (see the module)."""
    _SIZES[client] = (size, registered(client))


def slots_of(client: Any, request: Any = None) -> anyio.Semaphore | None:
    """The semaphore of ``client``'s connection slots in this event loop; None for a client
    without slots, or for a ``request`` (an ``httpx.Request``) that the lean transport
    carries itself."""
    found = _SIZES.get(client)
    if found is None:
        return None
    size, routes = found
    if routes is not None and request is not None:
        carries = getattr(routes.transport_for(request.url), "carries", None)
        if carries is not None and carries(request):
            return None
    per_client = _SLOTS.get(None)
    if per_client is None:
        per_client = weakref.WeakKeyDictionary()
        _SLOTS.set(per_client)
    semaphore = per_client.get(client)
    if semaphore is None:
        semaphore = per_client[client] = anyio.Semaphore(size)
    return semaphore


async def drop_unclaimed_connections(client: Any) -> None:
    """Close and drop the connections of ``client``'s pools that no request holds and none
    ever used.

    httpcore 1.0 gives a waiting request a connection before it opens it
    (``AsyncConnectionPool._assign_requests_to_connections``), and opens it before the
    request takes it (``AsyncHTTP11Connection.handle_async_request``): a request cancelled
    between the two leaves the connection in the pool, unopened or opened and never used,
    so never idle, closed, expired or available. It holds one of the pool's places for good,
    and enough of them leave every later call queued inside httpcore. The transport calls
    this after a request of the client metis made failed. A connection some request still
    holds (being opened for it) stays."""
    transports = client_transports(client) or []
    fallback = getattr(transports[0], "used_fallback", None) if transports else None
    for transport in [*transports, fallback]:  # fallback: the lean transport's httpx transport
        pool = transport_pool(transport) if transport is not None else None
        connections = getattr(pool, "_connections", None)
        requests = getattr(pool, "_requests", None)
        if not isinstance(connections, list) or not isinstance(requests, list):
            continue  # another pool than httpcore 1.0's
        claimed = {id(getattr(request, "connection", None)) for request in requests}
        for connection in list(connections):
            if id(connection) not in claimed and _never_used(connection):
                connections.remove(connection)
                with anyio.CancelScope(shield=True):
                    await connection.aclose()


def served_by(response: Any) -> Any:
    """The httpcore HTTP/1.1 connection that read ``response`` (None for another client, or
    another protocol): found through the byte streams httpx and httpcore wrap round it."""
    stream = getattr(response, "stream", None)
    for _ in range(_WRAPPERS):
        connection = getattr(stream, "_connection", None)
        if connection is not None:
            return connection if hasattr(connection, "_h11_state") else None
        stream = getattr(stream, "_stream", None) or getattr(stream, "_httpcore_stream", None)
    return None


_WRAPPERS = 5
"""How deep ``served_by`` looks: httpx's bound stream, its transport's, httpcore's pool's and
connection's."""


async def close_if_overread(connection: Any, client_closed: bool = False) -> None:
    """Close ``connection`` (its response closed) when bytes arrived past that response's
    end. A server that sends more than its ``Content-Length`` leaves the rest in h11's
    buffer; httpcore pools the connection as idle, and the next request on it would read
    those bytes as its answer's head and fail. Closed, it leaves the pool at the next
    request. Closed too when its client was closed while the response was read
    (``client_closed``): the closed pool would keep it, its socket open, for good."""
    state = getattr(connection, "_h11_state", None)
    leftover = getattr(state, "trailing_data", None)
    overread = leftover and leftover[0]
    if (overread or (client_closed and state is not None)) and not connection.is_closed():
        with anyio.CancelScope(shield=True):
            await connection.aclose()


def _never_used(connection: Any) -> bool:
    if getattr(connection, "_connect_failed", True) is not False:
        return False
    opened = getattr(connection, "_connection", False)
    if opened is None:
        return True  # given to a request, never opened
    state = getattr(getattr(opened, "_state", None), "name", None)
    return state == "NEW" and getattr(opened, "_request_count", None) == 0
