"""Which transport a client metis makes sends a URL through: its own, or the one over the proxy
the environment names for that URL, chosen as httpx chooses among a client's mounts.

httpx mounts the environment's proxies only for a client made without a transport of its own,
and keeps how it picks among mounts private. The clients metis makes are given their transport,
so :func:`environment_proxies` reads the environment as httpx does (``urllib.request``'s
``getproxies``: ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY``, upper or lower
case), the client is made with those as its ``mounts``, and :class:`Routes` keeps the same
table so that metis can pick the transport a request goes to (metis/transport/direct.py,
metis/transport/slots.py) and the proxy a WebSocket tunnels through (metis/transport/proxy.py)
as the client itself would: the most specific pattern first (one with a port, then the longest
host, then the longest scheme), ``NO_PROXY``'s hosts going direct.
"""

from __future__ import annotations

import inspect
import ipaddress
import re
import urllib.request
import weakref
from collections.abc import Mapping
from typing import Any

import httpx

from metis.transport import httpx_private


def environment_proxies() -> dict[str, str | None]:
    """The environment's proxies as httpx mounts them: ``"http://"``, ``"https://"`` and
    ``"all://"`` to the proxy's URL (``http://`` added when it names none), and each host
    ``NO_PROXY`` names to None (``*`` alone: no proxy at all). A name matches itself and its
    subdomains (``example.com``: ``api.example.com`` too), ``.example.com`` only subdomains; an
    address, ``localhost`` or a pattern with ``://`` only itself."""
    found = urllib.request.getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        url = found.get(scheme)
        if url:
            mounts[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for host in (name.strip() for name in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_address(host, ipaddress.IPv4Address) or host.lower() == "localhost":
            mounts[f"all://{host}"] = None
        elif _is_address(host, ipaddress.IPv6Address):
            mounts[f"all://[{host}]"] = None
        else:
            mounts[f"all://*{host}"] = None
    return mounts


def _is_address(host: str, kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    try:
        kind(host.split("/")[0])
    except ValueError:
        return False
    return True


class _Pattern:
    """One mount's key, matched as httpx matches it."""

    def __init__(self, key: str, transport: Any, proxy: str | None) -> None:
        if ":" not in key:
            raise ValueError(f"a mount is a URL pattern such as {key}://, got {key!r}")
        url = httpx.URL(key)
        self.scheme = "" if url.scheme == "all" else url.scheme
        self.host = "" if url.host == "*" else url.host
        self.port = url.port
        self.transport = transport
        self.proxy = proxy
        self.host_match: re.Pattern[str] | None = None
        if self.host.startswith("*."):  # subdomains only
            self.host_match = re.compile(rf"^.+\.{re.escape(self.host[2:])}$")
        elif self.host.startswith("*"):  # the name and its subdomains
            self.host_match = re.compile(rf"^(.+\.)?{re.escape(self.host[1:])}$")
        elif self.host:
            self.host_match = re.compile(rf"^{re.escape(self.host)}$")

    def matches(self, url: httpx.URL) -> bool:
        if self.scheme and self.scheme != url.scheme:
            return False
        if self.host_match is not None and not self.host_match.match(url.host):
            return False
        return self.port is None or self.port == url.port

    @property
    def priority(self) -> tuple[int, int, int]:
        return (0 if self.port is not None else 1, -len(self.host), -len(self.scheme))


class Routes:
    """A client's own transport and its mounts (pattern to transport, None: its own), with
    the proxy each mount goes through."""

    def __init__(
        self,
        transport: Any,
        mounts: Mapping[str, Any],
        proxies: Mapping[str, str | None] | None = None,
    ) -> None:
        self.transport = transport
        said = proxies or {}
        made = [_Pattern(key, mounted, said.get(key)) for key, mounted in mounts.items()]
        self._patterns = sorted(made, key=lambda pattern: pattern.priority)

    def transport_for(self, url: httpx.URL) -> Any:
        """The transport a request to ``url`` goes to."""
        if not self._patterns:
            return self.transport
        for pattern in self._patterns:
            if pattern.matches(url):
                return self.transport if pattern.transport is None else pattern.transport
        return self.transport

    def proxy_for(self, url: httpx.URL) -> str:
        """The proxy's URL for ``url`` (as the environment named it), "" when it goes direct."""
        for pattern in self._patterns:
            if pattern.matches(url):
                return (pattern.proxy or "") if pattern.transport is not None else ""
        return ""

    def transports(self) -> list[Any]:
        """The client's own transport, then each mount's."""
        mounted = [pattern.transport for pattern in self._patterns]
        return [self.transport, *(transport for transport in mounted if transport is not None)]


_ROUTES: weakref.WeakKeyDictionary[Any, Routes] = weakref.WeakKeyDictionary()


def register(client: Any, routes: Routes) -> None:
    """Say how ``client`` (made with ``routes``' transport and mounts) routes its requests."""
    _ROUTES[client] = routes


def registered(client: Any) -> Routes | None:
    """The routes ``client`` was made with, if metis made it (mocked or not)."""
    return _ROUTES.get(client)


def routes_of(client: Any) -> Routes | None:
    """How ``client`` routes its requests; None for a client metis did not make, or while a
    mock replaces the client's own choice (respx's ``using="httpx"``): httpx then chooses."""
    routes = _ROUTES.get(client)
    if routes is None or choice_replaced():
        return None
    return routes


_OWN_CHOICE: list[Any] = []


def choice_replaced() -> bool:
    """Whether a mock replaced httpx's client's choice of transport (its method that picks a
    URL's transport, which respx's ``using="httpx"`` mode replaces: only its identity is
    looked at, never called). Yes too when httpx has no such method (a release that moved
    it): a request then goes through httpx's own ``send``, which chooses."""
    chooser = httpx_private.CHOOSER
    method = getattr(httpx.AsyncClient, chooser, None)
    if _OWN_CHOICE and method is _OWN_CHOICE[0]:
        return False
    genuine = (
        inspect.isfunction(method)
        and method.__qualname__ == "AsyncClient." + chooser
        and not hasattr(method, "__wrapped__")
    )
    if genuine:
        _OWN_CHOICE[:] = [method]
    return not genuine
