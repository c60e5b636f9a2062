"""Which Redis the tool-id store talks to, and how it logs in: one server (``redis://``,
``rediss://`` for TLS, ``unix://``), a Sentinel-watched primary, or a Cluster.

:func:`parse_redis_url` reads a URL; :func:`connect` opens a `coredis
<https://coredis.readthedocs.io>`_ client for a target (``pip install 'metis[redis]'``). A
password never appears in a repr or in a message, not even in the message about a URL that
could not be read: everything before a URL's last ``@`` is treated as credentials, so a
password with an unescaped ``/``, ``#``, ``?`` or ``@`` still works.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import parse_qsl, unquote, urlsplit

from metis.core.digits import ascii_digits
from metis.errors import ConfigError

if TYPE_CHECKING:
    import coredis

    RedisClient: TypeAlias = coredis.Redis[bytes] | coredis.RedisCluster[bytes]

__all__ = ["RedisTarget", "connect", "parse_redis_url"]

DEFAULT_PORT = 6379
DEFAULT_SENTINEL_PORT = 26379
CLIENT_NAME = "metis-tool-ids"
"""The connection name the store's connections have on the server (``CLIENT LIST``)."""

Kind: TypeAlias = Literal["server", "unix", "sentinel", "cluster"]


@dataclass(frozen=True, repr=False)
class RedisTarget:
    """Where Redis is. ``nodes`` are ``(host, port)``: the server, the sentinels, or the
    cluster's startup nodes. ``tls`` uses ``ssl_context`` (default: the system's CAs)."""

    kind: Kind
    nodes: tuple[tuple[str, int], ...] = ()
    path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    service_name: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        """How messages name the server: ``host:port``, ``unix:/path``, ``sentinel ...``."""
        if self.kind == "unix":
            return f"unix:{self.path}"
        if self.kind == "sentinel":
            return f"sentinel {self.service_name}@{self._nodes}"
        if self.kind == "cluster":
            return f"cluster {self._nodes}"
        return self._nodes

    @property
    def _nodes(self) -> str:
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.nodes)

    @property
    def url(self) -> str:
        """The target as a URL with the password shown as ``***``."""
        login = ""
        if self.password is not None:
            login = f"{self.username or ''}:***@"
        if self.kind == "unix":
            return f"unix://{login}{self.path}?db={self.db}"
        scheme = "rediss" if self.tls else "redis"
        if self.kind == "server":
            return f"{scheme}://{login}{self._nodes}/{self.db}"
        if self.kind == "sentinel":
            return f"{scheme}+sentinel://{login}{self._nodes}/{self.service_name}/{self.db}"
        return f"{scheme}+cluster://{login}{self._nodes}"

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RedisTarget({self.url!r})"


def parse_redis_url(url: str, *, ssl_context: ssl.SSLContext | None = None) -> RedisTarget:
    """``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` the same over TLS,
    ``unix://[[user]:password@]/path[?db=N]``. Components are percent-decoded."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # host:port alone, say (the rest unshown: it may hold a password)
        raise ConfigError(
            "redis url: no scheme; the scheme must be redis://, rediss:// or unix:// "
            "(redis://host:port, say)"
        )
    if scheme not in ("redis", "rediss", "unix"):
        shown = scheme if len(scheme) <= 12 else "?"
        raise ConfigError(
            f"redis url: the scheme must be redis://, rediss:// or unix://, not {shown}://"
        )
    credentials, at, location = rest.rpartition("@")
    username, password = _credentials(credentials) if at else (None, None)
    where = f"{scheme}://{'***@' if at else ''}{location}"
    try:
        parts = urlsplit(f"//{location}")
        port = parts.port
    except ValueError:
        raise ConfigError(f"redis url {where}: the port must be a number") from None
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - {"db"})
    if unknown or parts.fragment:
        raise ConfigError(f"redis url {where}: unknown query parameter(s) {', '.join(unknown)}")
    path = unquote(parts.path)
    common: dict[str, Any] = {"username": username, "password": password}
    if scheme == "unix":
        if not path:
            raise ConfigError(f"redis url {where}: no socket path")
        return RedisTarget("unix", path=path, db=_db(query.get("db"), where), **common)
    if not parts.hostname:
        raise ConfigError(f"redis url {where}: no host")
    db_in_path = path.strip("/")
    if db_in_path and "db" in query:
        raise ConfigError(f"redis url {where}: the database is given twice")
    return RedisTarget(
        "server",
        nodes=((unquote(parts.hostname), port or DEFAULT_PORT),),
        db=_db(db_in_path or query.get("db"), where),
        tls=scheme == "rediss",
        ssl_context=ssl_context,
        **common,
    )


def _credentials(userinfo: str) -> tuple[str | None, str]:
    user, colon, password = userinfo.partition(":")
    if not colon:
        raise ConfigError("redis url: a user name needs a password (user:password@host)")
    return unquote(user) or None, unquote(password)


def _db(text: str | None, where: str) -> int:
    if text is None or text == "":
        return 0
    if not text.isascii() or not text.isdigit():
        raise ConfigError(f"redis url {where}: the database must be a number")
    return int(text)


def nodes_of(
    nodes: Sequence[tuple[str, int] | str], default_port: int
) -> tuple[tuple[str, int], ...]:
    """``("h", 7000)`` or ``"h:7000"`` (or ``"h"``) as ``(host, port)`` pairs."""
    out: list[tuple[str, int]] = []
    for node in nodes:
        if isinstance(node, str):
            host, _, port = node.rpartition(":") if ":" in node else (node, "", "")
            if port and not ascii_digits(port):
                raise ConfigError(f"redis: {node!r} is not host:port")
            node = (host.strip("[]"), int(port) if port else default_port)
        out.append((node[0], int(node[1])))
    if not out:
        raise ConfigError("redis: at least one node is needed")
    return tuple(out)


@asynccontextmanager
async def connect(
    target: RedisTarget, *, max_connections: int, seconds: float
) -> AsyncIterator[RedisClient]:
    """An entered coredis client for ``target``, closed on exit; ``seconds`` bounds each
    connect and each wait for a reply."""
    import coredis
    from coredis.connection import TCPLocation

    tls = target.ssl_context or (ssl.create_default_context() if target.tls else None)
    common: dict[str, Any] = {
        "username": target.username,
        "password": target.password,
        "stream_timeout": seconds,
        "connect_timeout": seconds,
        "ssl_context": tls,
    }
    if target.kind != "sentinel":
        client = _client(target, common, max_connections, seconds)
        async with client:
            yield client
        return
    sentinel_options = {**common, "username": None, "password": target.sentinel_password}
    locations = [TCPLocation(host, port) for host, port in target.nodes]
    async with coredis.Sentinel(
        locations, sentinel_kwargs=sentinel_options, client_name=CLIENT_NAME, **common
    ) as sentinel:
        primary = sentinel.primary_for(
            target.service_name or "", db=target.db, max_connections=max_connections
        )
        async with primary as client:
            yield client


def _client(
    target: RedisTarget, common: dict[str, Any], max_connections: int, seconds: float
) -> RedisClient:
    import coredis
    from coredis.connection import TCPLocation

    if target.kind == "cluster":  # RedisCluster names no connections: no client_name
        nodes = [TCPLocation(host, port) for host, port in target.nodes]
        return coredis.RedisCluster(startup_nodes=nodes, max_connections=max_connections, **common)
    host, port = target.nodes[0] if target.nodes else (None, None)
    return coredis.Redis(
        host=host,
        port=port,
        unix_socket_path=target.path,
        db=target.db,
        max_connections=max_connections,
        pool_timeout=seconds,
        client_name=CLIENT_NAME,
        **common,
    )
