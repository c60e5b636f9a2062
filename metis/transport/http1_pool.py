"""The keep-alive pool of the lean transport (:mod:`metis.transport.http1`).

Idle connections are kept per origin (scheme, host, port), most recently used taken first.
The limits are ``httpx.Limits``'s: at most ``max_connections`` open at once (idle, in use or
being opened), at most ``max_keepalive_connections`` of them idle (a connection released past
that is closed), and an idle one closed once it has been idle ``keepalive_expiry`` seconds
(one timer for the whole pool, set for the oldest idle connection). A request that finds none
idle and the pool full closes an idle connection of another origin, or waits, first come
first served, for one to be released, at most its ``pool`` timeout (``httpx.PoolTimeout``).

A pool that keeps a spare (the gateway's: metis/gateway/upstream_pool.py) opens one more
connection to an origin, in a task of its own, when a request has just taken or opened the
last one it had idle, so that the next request to find none idle takes that one rather than
waiting for a connection of its own to open. At most one is being opened per origin, within
the limits; one that fails to open is dropped silently (a request that opens its own meets
the same failure, as its own).

Every step is a dictionary lookup or a deque's end: nothing scans the pool per request.
A connection taken from the pool is checked before it is used: open, silent (a byte the
server sent while it was idle, or its hang-up, shows on the socket), not expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Awaitable, Callable

import httpx

from metis.transport.http1_protocol import Http1Connection

Origin = tuple[str, str, int]
"""(scheme, host, port)"""


class Pool:
    """The connections of one event loop (see the module)."""

    def __init__(self, limits: httpx.Limits, spare: bool = False) -> None:
        self.max_connections = limits.max_connections or math.inf
        keep = limits.max_keepalive_connections
        self.max_keepalive = math.inf if keep is None else keep
        expiry = limits.keepalive_expiry
        self.expiry = math.inf if expiry is None else expiry
        self.idle: dict[Origin, deque[Http1Connection]] = {}
        self.idle_count = 0
        self.total = 0
        """Connections open, in use or being opened."""
        self.waiters: deque[asyncio.Future[bool]] = deque()
        self.closed = False
        self._sweep: asyncio.TimerHandle | None = None
        self.spare = spare
        self.sparing: dict[Origin, asyncio.Task[None]] = {}
        """The spare being opened to each origin."""

    async def acquire(
        self,
        origin: Origin,
        seconds: float | None,
        open_connection: Callable[[], Awaitable[Http1Connection]],
    ) -> Http1Connection:
        """A connection to ``origin``: an idle one, else a new one (``open_connection``),
        else the first released within ``seconds``."""
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else loop.time() + seconds
        while True:
            connection = self._take_idle(origin, loop.time())
            if connection is not None:
                if self.spare and not self.idle.get(origin):
                    self._open_spare(loop, origin, open_connection)
                return connection
            if self.total < self.max_connections or self._drop_one_idle():
                self.total += 1
                if self.spare:
                    self._open_spare(loop, origin, open_connection)
                try:
                    connection = await open_connection()
                except BaseException:
                    self.total -= 1
                    self._wake()
                    raise
                connection.origin = origin
                return connection
            await self._wait(loop, deadline)

    def release(self, connection: Http1Connection) -> None:
        """``connection``'s response is closed: keep it idle if it may carry another request
        (and the pool has room for it), else close it."""
        connection.in_use = False
        connection.request = None
        if self.closed or self.idle_count >= self.max_keepalive or not connection.reusable():
            self.discard(connection)
            return
        self._keep(connection)

    def _keep(self, connection: Http1Connection) -> None:
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        connection.on_lost = self._lost
        self.idle.setdefault(connection.origin, deque()).append(connection)
        self.idle_count += 1
        if self._sweep is None and self.expiry != math.inf:
            self._sweep = loop.call_later(self.expiry, self._expire_idle)
        self._wake()

    def discard(self, connection: Http1Connection) -> None:
        """Close ``connection``, which a request held, and give its place to a waiting one."""
        connection.close()
        self.total -= 1
        self._wake()

    def close(self) -> None:
        """Close every idle connection; those in use close when their response does."""
        self.closed = True
        for task in list(self.sparing.values()):
            task.cancel()
        for connections in self.idle.values():
            for connection in connections:
                connection.close()
                self.total -= 1
        self.idle.clear()
        self.idle_count = 0
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None

    def _open_spare(
        self,
        loop: asyncio.AbstractEventLoop,
        origin: Origin,
        open_connection: Callable[[], Awaitable[Http1Connection]],
    ) -> None:
        if origin in self.sparing or self.closed or self.total >= self.max_connections:
            return
        self.total += 1
        self.sparing[origin] = loop.create_task(self._spared(origin, open_connection))

    async def _spared(
        self, origin: Origin, open_connection: Callable[[], Awaitable[Http1Connection]]
    ) -> None:
        """A spare connection to ``origin``, kept idle once open (see the module)."""
        try:
            connection = await open_connection()
        except BaseException as exc:
            self.total -= 1
            self._wake()
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            del self.sparing[origin]
        connection.origin = origin
        if self.closed or self.idle_count >= self.max_keepalive or not connection.usable_idle():
            self.discard(connection)
            return
        self._keep(connection)

    def _take_idle(self, origin: Origin, now: float) -> Http1Connection | None:
        connections = self.idle.get(origin)
        while connections:
            connection = connections.pop()
            self.idle_count -= 1
            connection.on_lost = None
            if now - connection.idle_since < self.expiry and connection.usable_idle():
                return connection
            connection.close()
            self.total -= 1
        return None

    def _drop_one_idle(self) -> bool:
        """Close the oldest idle connection of any origin, to open one to another."""
        for connections in self.idle.values():
            if connections:
                connection = connections.popleft()
                self.idle_count -= 1
                connection.close()
                self.total -= 1
                return True
        return False

    def _lost(self, connection: Http1Connection) -> None:
        """An idle connection ended (the server closed it): it leaves the pool now."""
        connections = self.idle.get(connection.origin)
        if connections is None or connection not in connections:
            return
        connections.remove(connection)
        self.idle_count -= 1
        self.total -= 1
        self._wake()

    def _expire_idle(self) -> None:
        self._sweep = None
        now = asyncio.get_running_loop().time()
        oldest = math.inf
        for connections in self.idle.values():
            while connections and now - connections[0].idle_since >= self.expiry:
                connection = connections.popleft()
                self.idle_count -= 1
                connection.close()
                self.total -= 1
            if connections:
                oldest = min(oldest, connections[0].idle_since)
        if oldest != math.inf and not self.closed:
            delay = max(0.0, oldest + self.expiry - now)
            self._sweep = asyncio.get_running_loop().call_later(delay, self._expire_idle)
        self._wake()

    async def _wait(self, loop: asyncio.AbstractEventLoop, deadline: float | None) -> None:
        waiter: asyncio.Future[bool] = loop.create_future()
        self.waiters.append(waiter)
        timer = None if deadline is None else loop.call_at(deadline, _time_out, waiter)
        try:
            timed_out = await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and not waiter.result():
                self._wake()  # it was woken, then cancelled: the next one takes its turn
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if not waiter.done() or waiter.cancelled() or waiter.result():
                _remove(self.waiters, waiter)
        if timed_out:
            raise httpx.PoolTimeout("no connection was free in time")

    def _wake(self) -> None:
        """Wake the first request waiting for a connection (it looks again)."""
        waiters = self.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(False)
                return


def _time_out(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(True)


def _remove(waiters: deque[asyncio.Future[bool]], waiter: asyncio.Future[bool]) -> None:
    with contextlib.suppress(ValueError):
        waiters.remove(waiter)
