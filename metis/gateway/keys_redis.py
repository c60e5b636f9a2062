"""Gateway keys' requests, leases and spend in Redis, shared by every gateway process and
machine that names the same server (``gateway.redis_url``; ``pip install 'metis[redis]'``).

Per key, under one hash tag (a Cluster keeps them on one node): a sorted set of the minute's
request starts, a sorted set of leases (each expiring, so a worker that died gives its places
back), and the spend in USD. One Lua script admits a request, so two gateways never give the
same place twice. A place or a charge this process could not settle (Redis gone as the request
ended, or as its place was given: the place may have been taken without the reply coming back)
is settled by the same script at the key's next request here, not left for the lease's hour.
Each charge has an id, which Redis remembers for :data:`CHARGE_SECONDS`: a charge sent again
because its reply was lost is made once. A charge still owed after :data:`OWED_CHARGE_SECONDS`
(an outage that long) is dropped and logged, never sent once its id may be forgotten.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from metis.core.ids import new_ulid
from metis.errors import ProtocolError, ServerError
from metis.gateway.budget_period import NO_PERIOD, Period, period_at
from metis.gateway.errors import shared_store_failed
from metis.gateway.keys import OVER_BUDGET, WINDOW_SECONDS, KeyState, renews_at
from metis.redis.server_clock import NOW, ServerWall

log = logging.getLogger("metis.gateway")

LEASE_SECONDS = 3600
"""How long a request's place is held if its gateway dies before giving it back."""
OWED_CHARGE_SECONDS = LEASE_SECONDS
"""How long this process keeps a charge Redis was not told of (or whose reply was lost), from
its first sending: past it, the charge is dropped with a log line naming the key and its USD
(``metis.gateway.key_not_settled``), for the operator to make if it was not, rather than sent
again when Redis may have forgotten that it was made."""
CHARGE_SECONDS = 2 * OWED_CHARGE_SECONDS
"""How long Redis remembers a charge made, so that the same charge sent again is not made:
longer than an owed charge lives, by an hour (the processes' clocks and Redis's need not run
alike, and a script may wait in a queue); a key's charges of the last two hours are held, one
member each."""
MAX_OWED_LEASES = 256
"""The most places a key's next request gives back for the ones Redis missed. The ones that may
still hold a place are the first (taken as Redis went, its reply lost; after that, each refused
request adds one never taken) or the latest (a Redis that runs each script but loses every
reply: each script gives back the places before it and takes one)."""

SPEND_KEPT_SECONDS = 7 * 86400
"""How long a budget period's spend stays in Redis past the period's end (where an operator may
still read it), then expires."""

# foreign_spend(): false, or what the key's spend (KEYS[3]) holds that no gateway writes (a
# value of another type, or text that is not a finite number). charge(now, id, usd): the spend
# charged usd, unless the charge of that id was made (the ids in KEYS[4], each for
# CHARGE_SECONDS), the spend then kept until the Unix time expires (0: for ever); false, or the
# error of a spend Redis would not add to (the id then forgotten).
_CHARGE = (
    NOW
    + f"""
local function foreign_spend()
  local kind = redis.call('TYPE', KEYS[3])['ok']
  if kind == 'none' then return false end
  if kind ~= 'string' then return 'a value of type ' .. kind end
  local text = redis.call('GET', KEYS[3])
  local spent = tonumber(text)
  if spent == nil or spent ~= spent or spent == math.huge or spent == -math.huge then
    return string.sub(text, 1, 40)
  end
  return false
end
local function charge(now, id, usd, expires)
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - {CHARGE_SECONDS})
  if redis.call('ZADD', KEYS[4], 'NX', now, id) == 1 then
    local made = redis.pcall('INCRBYFLOAT', KEYS[3], usd)
    if type(made) == 'table' and made.err then
      redis.call('ZREM', KEYS[4], id)
      return made.err
    end
    if expires > 0 then redis.call('EXPIREAT', KEYS[3], expires) end
  end
  redis.call('EXPIRE', KEYS[4], {CHARGE_SECONDS})
  return false
end
"""
)

# KEYS: starts, leases, spent, charges. ARGV: now (empty: the server's clock, which every
# gateway shares whatever its own says: metis.redis.server_clock), window, per_minute,
# at_once, budget (-1: none), lease id, lease seconds, when the spend expires (as charge()'s),
# the number of charges owed, each charge's id and USD, then the leases to give back. Returns
# {verdict, wait} as metis.gateway.keys numbers them, or {4 (_FOREIGN), what the spend holds}
# before any change.
_FOREIGN = 4
_ADMIT = (
    _CHARGE
    + """
local foreign = foreign_spend()
if foreign then return {4, foreign} end
local now, window = clock_now(ARGV[1]), tonumber(ARGV[2])
local expires = tonumber(ARGV[8])
local owed = 9 + 2 * tonumber(ARGV[9])
for i = 10, owed, 2 do
  local failed = charge(now, ARGV[i], ARGV[i + 1], expires)
  if failed then return {4, failed} end
end
for i = owed + 1, #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
end
local per_minute, at_once, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if budget >= 0 then
  local spent = tonumber(redis.call('GET', KEYS[3]) or '0')
  if spent ~= spent or spent < 0 or spent >= budget then  -- nan or below 0: fails closed
    return {1, '0'}
  end
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
)

# KEYS as _ADMIT's. ARGV: now (as _ADMIT's), the lease to give back (empty: none), the
# charge's id and USD (0: none), when the spend expires (as _ADMIT's). Returns false, or what a
# spend it could not charge holds.
_RELEASE = (
    _CHARGE
    + """
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[2])
end
if tonumber(ARGV[4]) > 0 then
  return foreign_spend() or charge(clock_now(ARGV[1]), ARGV[3], ARGV[4], tonumber(ARGV[5]))
end
return false
"""
)


def _limit(value: int | Decimal | None) -> str:
    return "-1" if value is None else str(value)


class RedisLedger:
    """``wall``: the Unix time, which sets a key's budget period: by default the Redis
    server's (:class:`~metis.redis.server_clock.ServerWall`), so every gateway naming it
    starts a period at the same moment whatever its own clock says; a test's clock."""

    def __init__(
        self,
        client: Any,
        prefix: str = "metis:gateway:keys:",
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.client, self.prefix, self.wall = client, prefix, wall
        self.server_wall = ServerWall(client)
        self._admit = client.register_script(_ADMIT)
        self._release = client.register_script(_RELEASE)
        self._leases: dict[int, list[str]] = {}  # per key state: the leases this process holds
        self._unsettled: dict[int, Unsettled] = {}  # per key state: what Redis did not take
        self._reported: dict[int, str] = {}  # per key state: the foreign spend last logged

    def _keys(self, state: KeyState, period: Period = NO_PERIOD) -> list[str]:
        """The key's starts, leases, spend (of ``period``) and charges."""
        base = f"{self.prefix}{{{state.spec.name}}}:"
        label = period.label
        spent = f"{base}spent:{label}" if label else base + "spent"
        return [base + "starts", base + "leases", spent, base + "charges"]

    async def period(self, state: KeyState) -> Period:
        """The key's budget period now, by :attr:`wall` (the server's clock by default)."""
        kind = state.spec.budget_period
        if kind == "none":
            return NO_PERIOD
        return period_at(kind, self.wall() if self.wall else await self.server_wall.now())

    async def admit(
        self, state: KeyState, now: float | None, budgeted: bool = True
    ) -> tuple[int, float]:
        spec, lease, period = state.spec, new_ulid(), await self.period(state)
        owed = self._unsettled.pop(id(state), None) or Unsettled()
        _drop_stale(state, owed)
        args = [
            "" if now is None else repr(now),
            repr(WINDOW_SECONDS),
            _limit(spec.requests_per_minute),
            _limit(spec.max_concurrent),
            _limit(spec.budget_usd if budgeted else None),
            lease,
            str(LEASE_SECONDS),
            _expires(period),
            str(len(owed.charges)),
            *owed.charge_args(),
            *owed.leases,
        ]
        try:
            verdict, wait = await self._admit(keys=self._keys(state, period), args=args)
        except BaseException as exc:  # the place may be taken all the same: given back later
            owed.leases.append(lease)
            self._owe(state, owed)
            if not isinstance(exc, Exception):
                raise
            raise shared_store_failed(f"check the limits of key {spec.name!r}", exc) from exc
        if int(verdict) == _FOREIGN:  # refused before any change: owed as it was
            self._owe(state, owed)
            raise self._foreign(state, wait, period)
        self._reported.pop(id(state), None)
        if int(verdict) == 0:
            self._leases.setdefault(id(state), []).append(lease)
        if int(verdict) == OVER_BUDGET:
            return OVER_BUDGET, renews_at(period)
        return int(verdict), float(wait)

    async def release(self, state: KeyState, usd: Decimal) -> None:
        held = self._leases.get(id(state)) or []
        lease = held.pop() if held else None
        if lease is None and not usd:
            return
        charge, sent, period = new_ulid(), time.monotonic(), await self.period(state)
        args = ["", lease or "", *_charge_args(charge, usd), _expires(period)]
        try:
            foreign = await self._release(keys=self._keys(state, period), args=args)
        except BaseException as exc:  # cancelled too (not answered in time): owed, once
            charges = {charge: (usd, sent)} if usd else {}
            self._owe(state, Unsettled([lease] if lease is not None else [], charges))
            if not isinstance(exc, Exception):
                raise
            doing = f"give key {state.spec.name!r} its place back and charge it {usd} USD"
            raise shared_store_failed(doing, exc) from exc
        if foreign is not None:  # its place given back; its charge owed until the spend is set
            self._owe(state, Unsettled([], {charge: (usd, sent)}))
            self._foreign(state, foreign, period)

    def _foreign(self, state: KeyState, held: Any, period: Period) -> ServerError:
        """The error of a key whose spend in Redis no gateway wrote (``held``: what it holds),
        logged once for the operator until the key is admitted again."""
        name = state.spec.name
        text = held.decode(errors="replace") if isinstance(held, bytes) else str(held)
        if self._reported.get(id(state)) != text:
            self._reported[id(state)] = text
            log.error(
                "gateway key %r: its spend in the shared store (%s) holds %r, which no gateway "
                "wrote; its requests get 500 until it is set to a number of USD or deleted",
                name,
                self._keys(state, period)[2],
                text,
                extra={"event": "metis.gateway.store_failed"},
            )
        return ServerError(
            f"the spend of key {name!r} could not be read: the gateway's shared store holds a "
            "value no gateway wrote there",
            retryable=False,
        )

    def _owe(self, state: KeyState, owed: Unsettled) -> None:
        """Keep what was not settled for the key's next request through this process: its
        charge, and its places when it has a number of them (else a lease holds nothing):
        the first and the latest, :data:`MAX_OWED_LEASES` in all (one in the middle ends
        with its lease)."""
        kept = self._unsettled.setdefault(id(state), Unsettled())
        if state.spec.max_concurrent is not None:
            kept.leases.extend(owed.leases)
            if len(kept.leases) > MAX_OWED_LEASES:
                half = MAX_OWED_LEASES // 2
                kept.leases[half:-half] = []
        kept.charges.update(owed.charges)  # one per request ended: those in flight

    async def reset(self, state: KeyState) -> bool:
        """The key's spend of its period now set back to 0 (deleted: every gateway reads that
        at its next request); whether it had one."""
        name = state.spec.name
        try:
            spent = self._keys(state, await self.period(state))[2]
            return bool(await self.client.delete([spent]))
        except Exception as exc:
            raise shared_store_failed(f"reset the spend of key {name!r}", exc) from exc

    async def spent(self, state: KeyState) -> Decimal:
        name = state.spec.name
        try:
            value = await self.client.get(self._keys(state, await self.period(state))[2])
        except Exception as exc:
            raise shared_store_failed(f"read the spend of key {name!r}", exc) from exc
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value or 0)
        with contextlib.suppress(ArithmeticError):
            if (usd := Decimal(text)).is_finite():
                return usd
        raise ProtocolError(f"the spend of key {name!r} in the shared store is {text[:40]!r}")


@dataclass(slots=True)
class Unsettled:
    """A key's places and spend that Redis has not yet been told of."""

    leases: list[str] = field(default_factory=list)
    charges: dict[str, tuple[Decimal, float]] = field(default_factory=dict)
    """By id: the USD, and when it was first sent (this process's steady clock)."""

    def charge_args(self) -> list[str]:
        return [part for id_, (usd, _) in self.charges.items() for part in _charge_args(id_, usd)]


def _drop_stale(state: KeyState, owed: Unsettled) -> None:
    """Drop the charges owed longer than :data:`OWED_CHARGE_SECONDS`, each logged."""
    oldest = time.monotonic() - OWED_CHARGE_SECONDS
    for charge, (usd, sent) in list(owed.charges.items()):
        if sent < oldest:
            del owed.charges[charge]
            log.error(
                "gateway key %r: a charge of %s USD (id %s) was dropped, owed for over %d s of "
                "the shared store failing; it may not have been made, and is not sent again "
                "now that the store may have forgotten its id",
                state.spec.name,
                format(usd, "f"),
                charge,
                OWED_CHARGE_SECONDS,
                extra={"event": "metis.gateway.key_not_settled"},
            )


def _expires(period: Period) -> str:
    """When a period's spend leaves Redis, as the script takes it: :data:`SPEND_KEPT_SECONDS`
    past its end (0: never)."""
    return "0" if period.ends is None else str(int(renews_at(period)) + SPEND_KEPT_SECONDS)


def _charge_args(charge: str, usd: Decimal) -> tuple[str, str]:
    return charge, format(usd, "f")
