"""httpcore 1.0's connection pool, its bookkeeping done in one pass, and only when a request
waits for a connection.

On every request and every response closed, httpcore 1.0's ``AsyncConnectionPool`` goes over
its connections (``_assign_requests_to_connections``): it drops the closed and expired ones,
closes an idle one while the pool holds more connections than its keep-alive limit, and gives
each queued request a connection. For that limit it counts the pool's connections by building
a list of them, once for each idle connection, so a pool of n connections with i idle spends
n x i calls on a pass. A gateway with a hundred streams in flight holds a hundred connections
or more, and makes two passes a request (benchmarks/README.md, "Results, 2026-11-27 (gwlat)").

:class:`LinearPool` makes the same decisions, in the same order, with that count kept as it
goes (the length of the pool, less what the pass removed), and looks for a queued request's
idle connection only when it needs one. A pass with no request waiting (a response closed,
none queued) decides nothing: the next request's pass makes those decisions before it
assigns, so a connection that expired or was closed by then is dropped at that pass instead.
:func:`linear_pools` gives a client's pools this bookkeeping.
"""

from __future__ import annotations

from typing import Any

import httpcore

from metis.transport.httpx_private import client_transports, transport_pool


class LinearPool(httpcore.AsyncConnectionPool):
    def _assign_requests_to_connections(self) -> list[Any]:
        queued = [request for request in self._requests if request.is_queued()]
        if not queued:  # a response closed and no request waits: the next request's pass
            return []  # makes this one's decisions, before it assigns
        closing: list[Any] = []
        kept: list[Any] = []
        size = len(self._connections)  # what httpcore's count of the pool comes to
        for connection in self._connections:
            if connection.is_closed():
                size -= 1
            elif connection.has_expired() or (
                connection.is_idle() and size > self._max_keepalive_connections
            ):
                size -= 1
                closing.append(connection)
            else:
                kept.append(connection)
        self._connections[:] = kept
        connections: list[Any] = self._connections
        for pool_request in queued:
            origin = pool_request.request.url.origin
            chosen = next(
                (c for c in connections if c.can_handle_request(origin) and c.is_available()),
                None,
            )
            if chosen is None and len(connections) >= self._max_connections:
                idle = next((c for c in connections if c.is_idle()), None)
                if idle is None:
                    continue  # it waits for a connection to be released
                connections.remove(idle)
                closing.append(idle)
            if chosen is None:
                chosen = self.create_connection(origin)
                connections.append(chosen)
            pool_request.assign_to_connection(chosen)
        return closing


def linear_pools(client: Any) -> bool:
    """Give ``client``'s connection pools (its own and its mounts') :class:`LinearPool`'s
    bookkeeping; False (nothing changed) when one of them is not httpcore 1.0's own pool."""
    transports = client_transports(client)
    if transports is None:  # an httpx that keeps them elsewhere (metis/transport/httpx_private.py)
        return False
    pools = [transport_pool(transport) for transport in transports]
    if not httpcore.__version__.startswith("1.0.") or not all(
        type(pool) is httpcore.AsyncConnectionPool for pool in pools
    ):
        return False
    for pool in pools:
        pool.__class__ = LinearPool
    return True
