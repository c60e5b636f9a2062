"""What a client metis makes holds: its connections in use or being opened, and the requests
waiting for one, on either transport (docs/http-client.md, "Which transport"): the lean
transport's own pool (asyncio) and httpx's (trio, a mocked httpx,
``METIS_HTTP_TRANSPORT=httpx``)."""

from __future__ import annotations

from typing import Any

from metis.transport.http1 import LeanTransport


def busy_connections(client: Any) -> int:
    transport = client._transport
    busy = 0
    if isinstance(transport, LeanTransport):
        pool = transport._pool
        busy += pool.total - pool.idle_count + sum(not w.done() for w in pool.waiters)
        transport = transport.used_fallback
        if transport is None:
            return busy
    pool = transport._pool
    held = [c for c in pool.connections if not (c.is_idle() or c.is_closed())]
    return busy + len(held) + len(pool._requests)


def tls_context(client: Any) -> Any:
    """The TLS context the client's connections are opened with."""
    transport = client._transport
    if isinstance(transport, LeanTransport):
        return transport.ssl_context
    return transport._pool._ssl_context
