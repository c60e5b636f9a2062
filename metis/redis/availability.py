"""Availability shared by worker processes through Redis (``pip install 'metis[redis]'``).

The same rules as :mod:`metis.routing.availability`, applied in one Lua script per change so
that two workers never both take the probe. Times are the Redis server's clock, which every
worker shares whatever its own clock says (:mod:`metis.redis.server_clock`). Give it an
entered ``coredis.Redis`` client::

    async with coredis.Redis(host="redis") as client:
        router = Router([...], availability=RedisAvailability(client))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metis.core.options import checked_init
from metis.errors import MAX_RETRY_AFTER_SECONDS, ErrorClass, ProtocolError
from metis.redis.server_clock import NOW, given_time
from metis.routing.availability import (
    Admission,
    AvailabilityRecord,
    Change,
    CooldownPolicy,
    State,
)

# ARGV: op, now (empty: the server's), probe_timeout, base cool-down, Retry-After (capped),
# max cool-down, ttl. Returns the old and new record, the admission, the cool-down and now.
_SCRIPT = (
    NOW
    + """
local h = redis.call('HMGET', KEYS[1], 'state', 'failures', 'until')
local state = h[1] or 'available'
local failures = tonumber(h[2] or '0')
local until_ = tonumber(h[3] or '0')
local op, now = ARGV[1], clock_now(ARGV[2])
if state == 'probing' and now >= until_ then state = 'cooling_down'; until_ = now end
local old_state, old_failures = state, failures
local admitted, probe, seconds = 0, 0, 0
if op == 'admit' then
  if state == 'available' then admitted = 1
  elseif now >= until_ then
    state = 'probing'; until_ = now + tonumber(ARGV[3]); admitted = 1; probe = 1
  end
elseif op == 'success' then state = 'available'; failures = 0; until_ = 0
elseif op == 'failure' then
  failures = failures + 1
  seconds = tonumber(ARGV[4]) * 2 ^ math.min(failures - 1, 32)
  seconds = math.min(math.max(seconds, tonumber(ARGV[5])), tonumber(ARGV[6]))
  state = 'cooling_down'; until_ = now + seconds
elseif op == 'abandon' and state == 'probing' then state = 'cooling_down'; until_ = now
end
if state == 'available' and failures == 0 then redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'state', state, 'failures', failures, 'until', tostring(until_))
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[7]))
end
return {old_state, old_failures, state, failures, tostring(until_), admitted, probe,
        tostring(seconds), tostring(now)}
"""
)


@checked_init
class RedisAvailability:
    """Availability records in Redis hashes under ``{prefix}{platform:model}``."""

    def __init__(
        self,
        client: Any,
        policy: CooldownPolicy | None = None,
        *,
        prefix: str = "metis:availability:",
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock``: seconds on one scale for every worker; default the Redis server's."""
        self.client = client
        self.policy = policy or CooldownPolicy()
        self.prefix = prefix
        self.clock = clock
        self._script = client.register_script(_SCRIPT)

    async def record(self, key: str) -> AvailabilityRecord:
        found = await self.client.hgetall(self.prefix + key)
        if not found:
            return AvailabilityRecord()
        values = {_text(k): _text(v) for k, v in found.items()}
        try:
            return AvailabilityRecord(
                State(values["state"]), int(values["failures"]), float(values["until"])
            )
        except (KeyError, ValueError) as exc:
            raise ProtocolError(
                f"redis: the availability record {self.prefix + key!r} is not one a router "
                f"wrote ({type(exc).__name__}: {exc})"
            ) from None

    async def admit(self, key: str) -> tuple[Admission, Change | None]:
        reply, change = await self._run(key, "admit")
        state, until, now = State(_text(reply[2])), float(_text(reply[4])), float(_text(reply[8]))
        admission = Admission(
            bool(reply[5]), bool(reply[6]), state, 0.0 if reply[5] else max(0.0, until - now)
        )
        return admission, change

    async def succeeded(self, key: str) -> Change | None:
        return (await self._run(key, "success"))[1]

    async def failed(
        self, key: str, error_class: ErrorClass, retry_after: float | None
    ) -> Change | None:
        base = dict(self.policy.base_seconds).get(error_class, self.policy.default_seconds)
        told = min(retry_after, MAX_RETRY_AFTER_SECONDS) if retry_after else 0.0
        return (await self._run(key, "failure", base, told, error_class.value))[1]

    async def abandoned(self, key: str) -> Change | None:
        return (await self._run(key, "abandon"))[1]

    async def _run(
        self, key: str, op: str, base: float = 0.0, told: float = 0.0, reason: str = ""
    ) -> tuple[list[Any], Change | None]:
        policy = self.policy
        ttl = int(policy.max_seconds + policy.probe_timeout) + 60
        args = [op, given_time(self.clock), repr(policy.probe_timeout), repr(base), repr(told)]
        reply = list(
            await self._script(
                keys=[self.prefix + key], args=[*args, repr(policy.max_seconds), ttl]
            )
        )
        old = AvailabilityRecord(State(_text(reply[0])), int(reply[1]))
        new = AvailabilityRecord(State(_text(reply[2])), int(reply[3]), float(_text(reply[4])))
        if new.state is old.state and new.failures == old.failures:
            return reply, None
        why = reason or {"admit": "probe", "success": "success"}.get(op, "abandoned")
        return reply, Change(key, old, new, why, float(_text(reply[7])))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
