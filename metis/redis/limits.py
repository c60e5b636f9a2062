"""Limits shared by worker processes through Redis (``pip install 'metis[redis]'``).

:class:`RedisBuckets` are the buckets of :class:`~metis.routing.limits.InMemoryBuckets`, each a
Redis hash changed by one Lua script, so concurrent workers never spend the same tokens twice.
:class:`RedisSlots` are concurrency slots: a sorted set of leases, each ending when its call
gives it back or, if the worker died, when it expires. Times are the Redis server's clock,
which every worker shares whatever its own clock says (:mod:`metis.redis.server_clock`)::

    async with coredis.Redis(host="redis") as client:
        router = Router([...], limits={"openai": Limits(tokens_per_minute=30_000)},
                        buckets=RedisBuckets(client), slots=RedisSlots(client))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from metis.core.options import checked_init
from metis.redis.server_clock import NOW, given_time

# ARGV: now (empty: the server's), per_minute, amount, max_wait (empty: no check, just add
# -amount; a wait over it takes nothing and is returned), ttl
_SCRIPT = (
    NOW
    + """
local h = redis.call('HMGET', KEYS[1], 'level', 'stamp')
local now, size = clock_now(ARGV[1]), tonumber(ARGV[2])
local amount, max_wait = tonumber(ARGV[3]), tonumber(ARGV[4])
local level, stamp = tonumber(h[1] or ARGV[2]), tonumber(h[2]) or now
level = math.min(size, level + math.max(0, now - stamp) * size / 60)
local wait = 0
if max_wait then
  wait = math.max(0, math.min(amount, size) - level) * 60 / size
  if wait > max_wait then return {0, tostring(wait)} end
  level = level - amount
else
  level = math.min(size, level - amount)
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'stamp', tostring(now))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return {1, tostring(wait)}
"""
)


@checked_init
class RedisBuckets:
    """Token buckets in Redis hashes under ``{prefix}{name}``."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "metis:limits:",
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock``: seconds on one scale for every worker; default the Redis server's."""
        self.client = client
        self.prefix = prefix
        self.clock = clock
        self._script = client.register_script(_SCRIPT)

    async def reserve(
        self, name: str, per_minute: float, amount: float, max_wait: float
    ) -> float | None:
        most = min(max(max_wait, -1.0), 1e12)  # an unbounded wait, as Lua reads a number
        taken, wait = await self._run(name, per_minute, amount, repr(most))
        # the script's verdict holds over its wait, which it writes to 14 digits
        return min(wait, max_wait) if taken else max(wait, math.nextafter(max_wait, math.inf))

    async def give_back(self, name: str, per_minute: float, amount: float) -> None:
        await self._run(name, per_minute, -amount, "")

    async def _run(
        self, name: str, per_minute: float, amount: float, max_wait: str
    ) -> tuple[bool, float]:
        args = [given_time(self.clock), repr(per_minute), repr(amount), max_wait, 120]
        reply = await self._script(keys=[self.prefix + name], args=args)
        wait = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
        return bool(int(reply[0])), float(wait)


# ARGV: now (empty: the server's), limit, lease seconds, holder, ttl
_TAKE_SLOT = (
    NOW
    + """
local now = clock_now(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
  return 1
end
return 0
"""
)


@checked_init
class RedisSlots:
    """Concurrency slots in Redis sorted sets under ``{prefix}{name}``."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "metis:limits:",
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock``: seconds on one scale for every worker; default the Redis server's."""
        self.client = client
        self.prefix = prefix
        self.clock = clock
        self._take = client.register_script(_TAKE_SLOT)

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        ttl = int(lease_seconds) + 60
        args = [given_time(self.clock), limit, repr(lease_seconds), holder, ttl]
        return bool(await self._take(keys=[self.prefix + name], args=args))

    async def give_back(self, name: str, holder: str) -> None:
        await self.client.zrem(self.prefix + name, [holder])
