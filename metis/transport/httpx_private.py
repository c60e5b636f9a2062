"""The private names of httpx (and of httpx2, which keeps the same) that metis reads, said once.

httpx has no public API for what these give:

- a client's own transport and the transports mounted for some URLs (``_transport``,
  ``_mounts``): metis gives their connection pools its connect backend
  (metis/transport/connect.py) and one-pass bookkeeping (metis/transport/pool_scan.py), drops
  the connections a cancelled request left unclaimed in them (metis/transport/slots.py), tells
  whether a client sends over the network (metis/transport/clients.py) and finds the TLS
  context a ``wss://`` connection should trust (metis/transport/ws_stage.py);
- an ``AsyncHTTPTransport``'s connection pool (``_pool``), for the same;
- a client's choice of a URL's transport (``_transport_for_url``): the proxy of a client
  metis did not make (metis/transport/proxy.py), and whether respx's ``using="httpx"`` mode
  replaced it (metis/transport/routes.py).

A release of httpx that moves one of them changes no answer: each read here gives None (or
no transports) for the name it cannot find, its caller does without what the name gave (a
pool keeps httpcore's own bookkeeping and connect, a ``wss://`` connection takes the system's
trust and the environment's proxy, a request goes through httpx's own ``send``), and a
warning names the missing name and httpx's version, once. The httpcore pool's own private
fields those callers read are looked up the same way, where they are read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx

log = logging.getLogger("metis.transport")

TRANSPORT = "_transport"
MOUNTS = "_mounts"
POOL = "_pool"
CHOOSER = "_transport_for_url"
CLIENT = "AsyncClient"
_PACKAGES = ("httpx", "httpx2")
_warned: set[str] = set()


def own_transport(client: Any) -> Any | None:
    """The transport ``client`` sends through where no mount applies; None when it keeps
    none under the name httpx gives it."""
    return _read(client, TRANSPORT, CLIENT)


def client_transports(client: Any) -> list[Any] | None:
    """``client``'s own transport and its mounted ones (a proxy's), those set; None when
    either is not where httpx keeps it."""
    transport = _read(client, TRANSPORT, CLIENT)
    mounts = _read(client, MOUNTS, CLIENT)
    if transport is None or not isinstance(mounts, dict):
        return None
    return [transport, *(each for each in mounts.values() if each is not None)]


def transport_pool(transport: Any) -> Any | None:
    """The connection pool of ``transport`` (httpx's ``AsyncHTTPTransport``, or metis's own
    transport, which keeps one under the same name); None for a transport with none."""
    return _read(transport, POOL, "AsyncHTTPTransport")


def url_chooser(client: Any) -> Callable[[Any], Any] | None:
    """``client``'s choice of a URL's transport (a method taking its package's URL); None
    when the client has none under that name."""
    method = _read(client, CHOOSER, CLIENT)
    return method if callable(method) else None


def _read(obj: Any, name: str, kind: str) -> Any | None:
    """``obj``'s ``name``; None, and a warning the first time, when an object of httpx's
    class ``kind`` (or a subclass) has none: a mock or another package's object may have no
    such name, and that says nothing of httpx."""
    found = getattr(obj, name, None)
    if found is None and name not in _warned and _of_httpx(obj, kind):
        _warned.add(name)
        log.warning(
            "httpx %s keeps no %s on its %s: metis does without it (docs/http-client.md)",
            httpx.__version__,
            name,
            type(obj).__name__,
            extra={"event": "metis.transport.httpx_moved", "attribute": name},
        )
    return found


def _of_httpx(obj: Any, kind: str) -> bool:
    return any(
        cls.__name__ == kind and cls.__module__.split(".")[0] in _PACKAGES
        for cls in type(obj).__mro__
    )
