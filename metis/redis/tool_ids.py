"""A tool-id store in Redis, for deployments whose turns land on different workers.

:class:`RedisToolIdStore` implements :class:`metis.pipeline.stores.ToolIdStore` over `coredis
<https://coredis.readthedocs.io>`_ (``pip install 'metis[redis]'``), which runs on anyio, so
the store works under asyncio and trio alike. It reaches one server (``redis://``,
``rediss://`` for TLS, ``unix://``; ACL user and password in the URL), a primary watched by
Sentinel (:meth:`RedisToolIdStore.sentinel`) or a Cluster (:meth:`RedisToolIdStore.cluster`).

Data layout: one hash per session, ``{key_prefix}{session}``, whose fields are
``{provider}:{canonical id}`` and values the provider's ids. A ``:`` or ``%`` in a session id
or provider name is percent-escaped, so no session's key or provider's fields can be another's.
Every read and write pushes the session's expiry ``ttl_seconds`` into the future, in the same
transaction; forgetting a session deletes its one key, which is atomic. One key per session
also keeps every command on one Cluster slot.

Connections: ``async with store:`` opens a pool for the event loop it runs in, shared by every
call made in that loop until the block ends (a block entered while a pool is open uses it);
the same store can be entered again in the next event loop (a worker calling ``anyio.run`` per
job). With no pool open, each store call opens a connection of its own and closes it after.

Failures are classified :mod:`metis.errors` errors naming the server, never its password:
:class:`~metis.errors.NetworkError` (down, refused, timed out), :class:`RedisError` (an error
reply, such as a refused password), :class:`~metis.errors.ProtocolError` (a malformed reply,
an id that is not UTF-8).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict, TypeVar, Unpack

import anyio
import anyio.lowlevel
from anyio.lowlevel import RunVar

from metis.core.options import checked_init
from metis.errors import ConfigError, ProtocolError
from metis.redis.errors import RedisError, classify
from metis.redis.target import (
    DEFAULT_PORT,
    DEFAULT_SENTINEL_PORT,
    RedisTarget,
    connect,
    nodes_of,
    parse_redis_url,
)

if TYPE_CHECKING:
    from types import TracebackType

    from metis.pipeline.stores import ToolIdStore
    from metis.redis.target import RedisClient

__all__ = ["RedisError", "RedisToolIdStore"]

T = TypeVar("T")


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


class StoreOptions(TypedDict, total=False):
    """What :meth:`RedisToolIdStore.sentinel` and :meth:`~RedisToolIdStore.cluster` pass on."""

    key_prefix: str
    ttl_seconds: int | None
    max_connections: int
    timeout: float


@dataclass
class _Pool:
    client: RedisClient
    exit_stack: AsyncExitStack
    opener: int  # the task that opened it, the only one that may close it (a task group's rule)
    depth: int = 1


@checked_init
class RedisToolIdStore:
    """A :class:`metis.pipeline.stores.ToolIdStore` shared by every worker that uses the same Redis.

    ``timeout`` bounds each store call, connecting included; ``max_connections`` bounds the
    pool of an entered store (a call waits for a free connection, within ``timeout``).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        key_prefix: str = "metis:toolids:",
        ttl_seconds: int | None = 7 * 24 * 3600,
        max_connections: int = 10,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        target: RedisTarget | None = None,
    ) -> None:
        try:
            import coredis  # noqa: F401
        except ImportError as exc:
            raise ImportError("RedisToolIdStore needs coredis: pip install 'metis[redis]'") from exc
        if ttl_seconds is not None and ttl_seconds < 1:
            raise ConfigError("redis: ttl_seconds must be at least 1 (or None: no expiry)")
        if max_connections < 1:
            raise ConfigError("redis: max_connections must be at least 1")
        if not timeout > 0:
            raise ConfigError("redis: timeout must be more than 0 seconds")
        self.target = target or parse_redis_url(url, ssl_context=ssl_context)
        self.key_prefix = key_prefix
        self.ttl_seconds = ttl_seconds
        self.max_connections = max_connections
        self.timeout = timeout
        self._pool: RunVar[_Pool | None] = RunVar("metis.redis_tool_id_store", None)

    @classmethod
    def sentinel(
        cls,
        sentinels: Sequence[tuple[str, int] | str],
        service_name: str,
        *,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        sentinel_password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        **options: Unpack[StoreOptions],
    ) -> RedisToolIdStore:
        """A store on the primary the sentinels (``host:port``) know as ``service_name``."""
        target = RedisTarget(
            "sentinel",
            nodes=nodes_of(sentinels, DEFAULT_SENTINEL_PORT),
            db=db,
            username=username,
            password=password,
            sentinel_password=sentinel_password,
            tls=ssl_context is not None,
            ssl_context=ssl_context,
            service_name=service_name,
        )
        return cls(target=target, **options)

    @classmethod
    def cluster(
        cls,
        startup_nodes: Sequence[tuple[str, int] | str],
        *,
        username: str | None = None,
        password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        **options: Unpack[StoreOptions],
    ) -> RedisToolIdStore:
        """A store on a Redis Cluster, found from any of ``startup_nodes`` (``host:port``)."""
        target = RedisTarget(
            "cluster",
            nodes=nodes_of(startup_nodes, DEFAULT_PORT),
            username=username,
            password=password,
            tls=ssl_context is not None,
            ssl_context=ssl_context,
        )
        return cls(target=target, **options)

    def __repr__(self) -> str:
        return (
            f"RedisToolIdStore({self.target.url!r}, key_prefix={self.key_prefix!r}, "
            f"ttl_seconds={self.ttl_seconds})"
        )

    def session_key(self, session_id: str) -> str:
        """The hash that holds the session's tool ids."""
        return f"{self.key_prefix}{_escape(session_id)}"

    @staticmethod
    def field(provider: str, canonical_id: str) -> str:
        """The hash field of one provider's id for one canonical id."""
        return f"{_escape(provider)}:{canonical_id}"

    # ToolIdStore ---------------------------------------------------------------------------

    async def provider_ids(
        self, session_id: str, provider: str, canonical_ids: Iterable[str]
    ) -> dict[str, str]:
        ids = list(dict.fromkeys(canonical_ids))
        if not ids:
            return {}
        key, fields = self.session_key(session_id), [self.field(provider, c) for c in ids]

        async def read(client: RedisClient) -> Sequence[object]:
            async with client.pipeline(transaction=True) as pipe:
                values = pipe.hmget(key, fields)
                if self.ttl_seconds is not None:
                    pipe.expire(key, self.ttl_seconds)
            return await values

        values = await self._run(read)
        if not isinstance(values, list | tuple) or len(values) != len(ids):
            raise ProtocolError(
                f"redis {self.target.where}: HMGET of {len(ids)} fields gave {values!r:.80}"
            )
        return {
            cid: self._text(pid, key)
            for cid, pid in zip(ids, values, strict=True)
            if pid is not None
        }

    async def remember(self, session_id: str, provider: str, pairs: Mapping[str, str]) -> None:
        if not pairs:
            return
        key = self.session_key(session_id)
        mapping = {self.field(provider, cid): pid for cid, pid in pairs.items()}

        async def write(client: RedisClient) -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping)
                if self.ttl_seconds is not None:
                    pipe.expire(key, self.ttl_seconds)

        await self._run(write)

    async def forget(self, session_id: str) -> None:
        key = self.session_key(session_id)

        async def delete(client: RedisClient) -> None:
            await client.delete([key])

        await self._run(delete)

    # Connections ---------------------------------------------------------------------------

    async def __aenter__(self) -> RedisToolIdStore:
        """Open a pool for this event loop, or use the one already open in it."""
        pool = self._pool.get()
        if pool is not None:
            if pool.opener == anyio.get_current_task().id:
                pool.depth += 1
            return self
        exit_stack = AsyncExitStack()
        try:
            client = await exit_stack.enter_async_context(self._connect())
        except Exception as exc:
            raise classify(exc, self.target, self.timeout) from None
        self._pool.set(_Pool(client, exit_stack, anyio.get_current_task().id))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Leave the ``async with`` block. The outermost block of the task that opened this
        loop's pool closes it; other tasks' blocks only used it."""
        pool = self._pool.get()
        if pool is None or pool.opener != anyio.get_current_task().id:
            return
        pool.depth -= 1
        if pool.depth == 0:
            self._pool.set(None)
            try:
                await pool.exit_stack.aclose()
            except Exception as exc:
                raise classify(exc, self.target, self.timeout) from None

    @asynccontextmanager
    async def client(self) -> AsyncIterator[RedisClient]:
        """The coredis client of this event loop's pool, or one of its own for the block."""
        pool = self._pool.get()
        if pool is not None:
            yield pool.client
            return
        async with self._connect() as client:
            yield client

    def _connect(self) -> AbstractAsyncContextManager[RedisClient]:
        return connect(self.target, max_connections=self.max_connections, seconds=self.timeout)

    async def _run(self, command: Callable[[RedisClient], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(self.timeout):
                try:
                    async with self.client() as client:
                        return await command(client)
                except Exception:
                    # coredis reports a cancel during connect as a ConnectionError: when a
                    # cancel scope around this call fired, let it be the cancel it was
                    await anyio.lowlevel.checkpoint_if_cancelled()
                    raise
        except RedisError:
            raise
        except Exception as exc:
            raise classify(exc, self.target, self.timeout) from None

    def _text(self, value: object, key: str) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):
            try:
                return value.decode()
            except UnicodeDecodeError:
                pass
        raise ProtocolError(
            f"redis {self.target.where}: a provider tool id in {key!r} is not UTF-8 text"
        )


if TYPE_CHECKING:
    _conforms: ToolIdStore = RedisToolIdStore()
