"""The connection pools of the gateway's adapters (docs/gateway.md, "Connections upstream").

A library caller's adapter keeps, as the official SDKs do, 100 of its connections idle. A
gateway serving a hundred streams or more holds about that many open at once, so that limit
closes a connection as soon as the pool passes it, and the next request opens another: at
~100 streams in flight, 350 requests in 400 opened a connection (benchmarks/README.md,
"Results, 2026-11-27 (gwlat)"). The gateway's registry makes each adapter entry's client
with every connection kept (up to the pool's 1,000, each closed after its idle expiry as
before), on metis's lean HTTP/1.1 transport (metis/transport/http1.py: httpx's own transport
was most of a paced pass-through request's CPU; benchmarks/README.md, "Results, 2026-11-27
(lean)"). Without httptools, on httpx's own transport, with httpcore's bookkeeping done in
one pass (metis/transport/pool_scan.py). The lean transport's pools keep a spare connection
to each upstream, opened while the request that took the last idle one goes on, so that a
stream beyond those in flight so far does not wait for a connection of its own to open
(metis/transport/http1_pool.py; benchmarks/README.md, "Results, 2026-11-30 (gwtail)").
"""

from __future__ import annotations

import httpx

from metis.transport import slots
from metis.transport.direct import send_directly
from metis.transport.http1 import LeanTransport
from metis.transport.httpx_private import own_transport
from metis.transport.pool_scan import linear_pools
from metis.transport.stage import http_client


def upstream_client(timeout_seconds: float) -> httpx.AsyncClient:
    """An adapter entry's client, as the gateway's registry makes it (see the module)."""
    client = http_client(timeout_seconds, keep_alive=slots.MAX_CONNECTIONS, lean=True)
    linear_pools(client)  # (without httptools: httpx's own transport)
    transport = own_transport(client)
    if isinstance(transport, LeanTransport):
        transport.keep_spare()
    return send_directly(client, keep_cookies=False)
