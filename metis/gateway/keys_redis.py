"""Gateway keys' requests, leases and spend in Redis, shared by every gateway process and
machine that names the same server (``gateway.redis_url``; ``pip install 'metis[redis]'``).

Per key, under one hash tag (a Cluster keeps them on one node): a sorted set of the minute's
request starts, a sorted set of leases (each expiring, so a worker that died gives its places
back), and the spend in USD. One Lua script admits a request, so two gateways never give the
same place twice.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from metis.core.ids import new_ulid
from metis.gateway.errors import shared_store_failed
from metis.gateway.keys import WINDOW_SECONDS, KeyState

LEASE_SECONDS = 3600
"""How long a request's place is held if its gateway dies before giving it back."""

# KEYS: starts, leases, spent. ARGV: now, window, per_minute, at_once, budget (-1: none),
# lease id, lease seconds. Returns {verdict, wait} as metis.gateway.keys numbers them.
_ADMIT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local per_minute, at_once, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if budget >= 0 and tonumber(redis.call('GET', KEYS[3]) or '0') >= budget then
  return {1, '0'}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if per_minute >= 0 and redis.call('ZCARD', KEYS[1]) >= per_minute then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {2, tostring(tonumber(first[2]) + window - now)}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if at_once >= 0 and redis.call('ZCARD', KEYS[2]) >= at_once then
  return {3, '1'}
end
redis.call('ZADD', KEYS[1], now, ARGV[6])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[7]), ARGV[6])
redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[7]) + 1)
return {0, '0'}
"""


def _limit(value: int | Decimal | None) -> str:
    return "-1" if value is None else str(value)


class RedisLedger:
    def __init__(self, client: Any, prefix: str = "metis:gateway:keys:") -> None:
        self.client, self.prefix = client, prefix
        self._admit = client.register_script(_ADMIT)
        self._leases: dict[int, list[str]] = {}  # per key state: the leases this process holds

    def _keys(self, state: KeyState) -> list[str]:
        base = f"{self.prefix}{{{state.spec.name}}}:"
        return [base + "starts", base + "leases", base + "spent"]

    async def admit(self, state: KeyState, now: float, budgeted: bool = True) -> tuple[int, float]:
        spec, lease = state.spec, new_ulid()
        args = [
            repr(now),
            repr(WINDOW_SECONDS),
            _limit(spec.requests_per_minute),
            _limit(spec.max_concurrent),
            _limit(spec.budget_usd if budgeted else None),
            lease,
            str(LEASE_SECONDS),
        ]
        try:
            verdict, wait = await self._admit(keys=self._keys(state), args=args)
        except Exception as exc:
            raise shared_store_failed(f"check key {spec.name!r}'s limits", exc) from exc
        if int(verdict) == 0:
            self._leases.setdefault(id(state), []).append(lease)
        return int(verdict), float(wait)

    async def release(self, state: KeyState, usd: Decimal) -> None:
        held = self._leases.get(id(state)) or []
        _, leases, spent = self._keys(state)
        try:
            if held:
                await self.client.zrem(leases, [held.pop()])
            if usd:
                await self.client.incrbyfloat(spent, float(usd))
        except Exception as exc:
            doing = f"give key {state.spec.name!r} its place back and charge it {usd} USD"
            raise shared_store_failed(doing, exc) from exc

    async def spent(self, state: KeyState) -> Decimal:
        value = await self.client.get(self._keys(state)[2])
        return Decimal(value.decode() if isinstance(value, bytes) else value or 0)
