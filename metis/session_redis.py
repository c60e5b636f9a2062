"""A tool-id store in Redis, for deployments whose turns land on different workers.

:class:`RedisToolIdStore` implements :class:`metis.session.ToolIdStore` over a small RESP2
client written on anyio streams, so it runs under asyncio and trio alike (redis-py's client
is asyncio-only). The client knows only the commands the store needs.

Data layout, under ``key_prefix`` (``metis:toolids:`` by default):

* ``{prefix}{session}:{provider}``: a hash, canonical tool id -> provider tool id;
* ``{prefix}{session}``: a set of the providers the session has a hash for, so ``forget``
  can find them.

``remember`` writes the pairs, adds the provider to the set and refreshes both keys' time to
live in one MULTI/EXEC transaction, so no key is ever left without its expiry. A ``:`` or
``%`` in a session id or provider name is percent-escaped in keys, so no session's keys can
be another's.

A store owns a pool of connections that belongs to one event loop; use one store per loop
and close it with :meth:`RedisToolIdStore.aclose` (or ``async with``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from metis.errors import ConfigError
from metis.redis_client import Arg, RedisClient

if TYPE_CHECKING:
    from types import TracebackType

    from metis.session import ToolIdStore

__all__ = ["RedisToolIdStore"]


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


class RedisToolIdStore:
    """A :class:`metis.session.ToolIdStore` shared by every worker that uses the same Redis.

    One hash per (session, provider) maps canonical ids to provider ids; each ``remember``
    pushes the session's expiry ``ttl_seconds`` into the future (``None``: never expire).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        key_prefix: str = "metis:toolids:",
        ttl_seconds: int | None = 7 * 24 * 3600,
        max_connections: int = 10,
        timeout: float = 5.0,
    ) -> None:
        if ttl_seconds is not None and ttl_seconds < 1:
            raise ConfigError("redis: ttl_seconds must be at least 1 (or None: no expiry)")
        self.client = RedisClient(url, max_connections=max_connections, timeout=timeout)
        self.key_prefix = key_prefix
        self.ttl_seconds = ttl_seconds

    def __repr__(self) -> str:
        return (
            f"RedisToolIdStore({self.client.url!r}, key_prefix={self.key_prefix!r}, "
            f"ttl_seconds={self.ttl_seconds})"
        )

    def session_key(self, session_id: str) -> str:
        """The set of providers the session has tool ids for."""
        return f"{self.key_prefix}{_escape(session_id)}"

    def hash_key(self, session_id: str, provider: str) -> str:
        """The hash of one provider's ids in the session."""
        return f"{self.key_prefix}{_escape(session_id)}:{_escape(provider)}"

    async def provider_ids(
        self, session_id: str, provider: str, canonical_ids: Iterable[str]
    ) -> dict[str, str]:
        ids = list(dict.fromkeys(canonical_ids))
        if not ids:
            return {}
        values = await self.client.hmget(self.hash_key(session_id, provider), ids)
        return {cid: pid.decode() for cid, pid in zip(ids, values, strict=True) if pid is not None}

    async def remember(self, session_id: str, provider: str, pairs: Mapping[str, str]) -> None:
        if not pairs:
            return
        key, session = self.hash_key(session_id, provider), self.session_key(session_id)
        commands: list[tuple[Arg, ...]] = [
            ("HSET", key, *(x for pair in pairs.items() for x in pair)),
            ("SADD", session, provider),
        ]
        if self.ttl_seconds is not None:
            commands += [("EXPIRE", key, self.ttl_seconds), ("EXPIRE", session, self.ttl_seconds)]
        await self.client.transaction(commands)

    async def forget(self, session_id: str) -> None:
        session = self.session_key(session_id)
        providers = await self.client.smembers(session)
        hashes = [self.hash_key(session_id, p.decode()) for p in providers]
        await self.client.delete(session, *hashes)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.client.aclose()

    async def __aenter__(self) -> RedisToolIdStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


if TYPE_CHECKING:
    _conforms: ToolIdStore = RedisToolIdStore()
