"""Client-side limits per provider or model: concurrent calls, requests and tokens per minute.

A call is admitted when a concurrency slot is free (an anyio capacity limiter) and both token
buckets can give it what it needs: one request, and its input-token estimate. The buckets
reserve first and wait out any debt, so callers are served in the order they asked; a call
that could not be served before its deadline (or at once, with ``on_limit: fail``) fails with
a ``rate_limit`` error and takes nothing. When the call ends, the token bucket is corrected by
the usage the provider reported (input and output tokens, instead of the estimate).

Buckets and slots live in memory by default; :class:`~metis.redis.limits.RedisBuckets`
and :class:`~metis.redis.limits.RedisSlots` share them across worker processes (a
shared slot is a lease that ends with the call, or at its deadline if the worker died). A
limiter given them as :class:`~metis.routing.shared_state.Fallback` (as a router does) goes on
with its own buckets and slots while the shared ones fail.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metis.core.any_loop import AnyLoopSlots
from metis.core.config_files import config_error
from metis.core.options import checked_init
from metis.errors import RateLimitError
from metis.model.response import TokenUsage
from metis.routing.shared_state import Fallback


@checked_init
class Limits(BaseModel):
    """The limits of one provider or model (``limits:`` in a route of models.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: int | None = Field(default=None, ge=1, strict=True)
    requests_per_minute: float | None = Field(default=None, gt=0, strict=True)
    tokens_per_minute: float | None = Field(default=None, gt=0, strict=True)
    on_limit: Literal["wait", "fail"] = "wait"
    """wait: up to the call's deadline; fail: a rate_limit error at once."""

    def __init__(self, **given: Any) -> None:
        try:
            super().__init__(**given)
        except ValidationError as exc:
            raise config_error(exc, "Limits", Limits) from None

    # pydantic's own __init__ in all but its error: a Limits given as a dict (in models.yaml)
    # is validated in pydantic's core, whose errors say where in the file.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


class Buckets(Protocol):
    """Token buckets by name, refilled at ``per_minute / 60`` a second up to ``per_minute``."""

    async def reserve(
        self, name: str, per_minute: float, amount: float, max_wait: float
    ) -> float | None:
        """Take ``amount``; the seconds to wait before using it. A wait over ``max_wait`` (any,
        when it is below 0) takes nothing: it is the time until the bucket would give
        ``amount``, its debt paid. None: nothing taken, the wait not known."""
        ...

    async def give_back(self, name: str, per_minute: float, amount: float) -> None:
        """Return ``amount`` (negative: take more), never above the bucket's size."""
        ...


class SharedSlots(Protocol):
    """Concurrency slots shared by processes: leases that end when given back or expire."""

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        """Take one of ``limit`` slots for ``holder``; False when all are held."""
        ...

    async def give_back(self, name: str, holder: str) -> None:
        """End ``holder``'s lease of a slot."""
        ...


SHARED_SLOT_POLL_SECONDS = 0.05
"""How often a call waiting for a shared slot asks again."""


@dataclass(slots=True)
class _Bucket:
    level: float
    stamp: float


@checked_init
class InMemoryBuckets:
    """The buckets of one process. ``clock`` is seconds on any monotonic scale."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def _refilled(self, name: str, per_minute: float) -> _Bucket:
        now = self.clock()
        bucket = self._buckets.setdefault(name, _Bucket(per_minute, now))
        bucket.level = min(per_minute, bucket.level + (now - bucket.stamp) * per_minute / 60.0)
        bucket.stamp = now
        return bucket

    async def reserve(
        self, name: str, per_minute: float, amount: float, max_wait: float
    ) -> float | None:
        """Take ``amount``; the seconds to wait before using it, or None (nothing taken) when
        that would be more than ``max_wait``."""
        bucket = self._refilled(name, per_minute)
        wait = bucket_wait(bucket.level, per_minute, amount)
        if wait > max_wait:
            return wait
        bucket.level -= amount
        return wait

    async def give_back(self, name: str, per_minute: float, amount: float) -> None:
        """Return ``amount`` (negative: take more), never above the bucket's size."""
        bucket = self._refilled(name, per_minute)
        bucket.level = min(per_minute, bucket.level + amount)


class InMemorySlots:
    """Concurrency slots of one process as leases: what stands in for shared slots while their
    store fails. ``clock`` is seconds on any monotonic scale."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._leases: dict[str, dict[str, float]] = {}

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        """Take one of ``limit`` slots for ``holder``; False when all are held."""
        now = self.clock()
        leases = self._leases.setdefault(name, {})
        for expired in [h for h, end in leases.items() if end <= now]:
            del leases[expired]
        if len(leases) >= limit:
            return False
        leases[holder] = now + lease_seconds
        return True

    async def give_back(self, name: str, holder: str) -> None:
        """End ``holder``'s lease of a slot."""
        self._leases.get(name, {}).pop(holder, None)


def bucket_wait(level: float, per_minute: float, amount: float) -> float:
    """Seconds until a bucket at ``level`` holds ``amount`` (or is full, for an amount larger
    than the whole bucket: such a call goes when the bucket is full and leaves it in debt)."""
    needed = min(amount, per_minute) - level
    return max(0.0, needed) * 60.0 / per_minute


@dataclass(slots=True)
class Admitted:
    """A call let through; :meth:`settle` corrects the token bucket with the real usage."""

    limiter: Limiter
    estimate: int
    settled: bool = False

    async def settle(self, usage: TokenUsage | None) -> None:
        per_minute = self.limiter.limits.tokens_per_minute
        if self.settled or usage is None or per_minute is None:
            return
        self.settled = True
        unused = self.estimate - (usage.total_input_tokens + usage.output_tokens)
        name = f"{self.limiter.key}:tokens"
        with anyio.CancelScope(shield=True):
            await self.limiter.bucket_store.run(lambda b: b.give_back(name, per_minute, unused))


@checked_init
class Limiter:
    """Admits calls to one provider or model (``key``) within its :class:`Limits`."""

    def __init__(
        self,
        key: str,
        limits: Limits,
        buckets: Buckets | Fallback[Buckets] | None = None,
        shared_slots: SharedSlots | Fallback[SharedSlots] | None = None,
    ) -> None:
        self.key = key
        self.limits = limits
        # a shared store given here, not by a router, is bounded and stood in for as a
        # router's is (metis.routing.shared_state): a Redis that hangs never holds a call
        if buckets is None or isinstance(buckets, InMemoryBuckets):
            buckets = Fallback.local_only("buckets", buckets or InMemoryBuckets())
        elif not isinstance(buckets, Fallback):
            buckets = Fallback("buckets", buckets, InMemoryBuckets(), route=key)
        self.bucket_store: Fallback[Buckets] = buckets
        if shared_slots is not None and not isinstance(shared_slots, Fallback):
            shared_slots = Fallback("slots", shared_slots, InMemorySlots(), route=key)
        self.slot_store: Fallback[SharedSlots] | None = shared_slots
        self._slots: AnyLoopSlots | None = None

    def __repr__(self) -> str:
        return f"<Limiter {self.key}: {self.limits!r}>"

    @asynccontextmanager
    async def admit(self, estimate: int, deadline: float = math.inf) -> AsyncIterator[Admitted]:
        """Hold a slot and the budget for one call of about ``estimate`` input tokens."""
        async with AsyncExitStack() as stack:
            if self.limits.max_concurrent is not None and self.slot_store is not None:
                holder = uuid.uuid4().hex
                # given back however the take ends: one cut short may have run on the server
                stack.push_async_callback(self._give_slot_back, holder)
                await self._shared_slot(deadline, holder)
            elif self.limits.max_concurrent is not None:
                borrower = object()  # not the task: a stream may be read from several tasks
                await self._slot(deadline, borrower)
                stack.callback(self._limiter().give_back, borrower)
            wait = await self._take_both(estimate, deadline)
            try:
                await anyio.sleep(wait)
            except BaseException:  # cancelled while waiting its turn: it used nothing
                await self._give_back("requests", 1)
                await self._give_back("tokens", estimate)
                raise
            yield Admitted(self, estimate)

    def _per_minute(self, what: str) -> float | None:
        if what == "requests":
            return self.limits.requests_per_minute
        return self.limits.tokens_per_minute

    async def _give_back(self, what: str, amount: int) -> None:
        per_minute = self._per_minute(what)
        if per_minute is None:
            return
        name = f"{self.key}:{what}"
        with anyio.CancelScope(shield=True):
            await self.bucket_store.run(lambda b: b.give_back(name, per_minute, amount))

    async def _slot(self, deadline: float, borrower: object) -> None:
        slots = self._limiter()
        if slots.take_nowait(borrower):
            return
        if self.limits.on_limit == "fail":
            raise self._refused("concurrent calls", None)
        with anyio.move_on_after(deadline - anyio.current_time()):
            await slots.take(borrower)
            return
        raise self._refused("concurrent calls", None)

    async def _shared_slot(self, deadline: float, holder: str) -> None:
        slots, limit = self.slot_store, self.limits.max_concurrent
        assert slots is not None and limit is not None
        lease = (deadline - anyio.current_time() if math.isfinite(deadline) else 600.0) + 30.0
        name = f"{self.key}:slots"
        while not await slots.run(lambda s: s.take(name, limit, holder, lease), deadline):
            if self.limits.on_limit == "fail":
                raise self._refused("concurrent calls", None)
            if anyio.current_time() + SHARED_SLOT_POLL_SECONDS > deadline:
                raise self._refused("concurrent calls", None)
            await anyio.sleep(SHARED_SLOT_POLL_SECONDS)

    async def _give_slot_back(self, holder: str) -> None:
        assert self.slot_store is not None
        name = f"{self.key}:slots"
        with anyio.CancelScope(shield=True):
            await self.slot_store.everywhere(lambda s: s.give_back(name, holder))

    def _limiter(self) -> AnyLoopSlots:
        """This process's slots, shared by the event loops and threads calling through it."""
        if self._slots is None:
            self._slots = AnyLoopSlots(self.limits.max_concurrent or 1)
        return self._slots

    async def _take_both(self, estimate: int, deadline: float) -> float:
        """Reserve one request and ``estimate`` tokens; the seconds to wait before the call.
        A refusal tells the wait until both buckets would admit it (a token bucket in debt
        may make it longer than the refusing bucket's)."""
        max_wait = 0.0 if self.limits.on_limit == "fail" else deadline - anyio.current_time()
        taken, request_wait = await self._reserve("requests", 1, max_wait, deadline)
        if not taken:
            _, token_wait = await self._reserve("tokens", estimate, -1.0, deadline)
            raise self._refused("requests per minute", max(request_wait, token_wait))
        taken, token_wait = await self._reserve("tokens", estimate, max_wait, deadline)
        if not taken:
            await self._give_back("requests", 1)
            raise self._refused("tokens per minute", max(request_wait, token_wait))
        return max(request_wait, token_wait)

    async def _reserve(
        self, what: str, amount: int, max_wait: float, deadline: float
    ) -> tuple[bool, float]:
        """Whether the bucket gave ``amount`` (a limit not set gives it at once), and the
        seconds to wait for it; a ``max_wait`` below 0 takes nothing and tells the wait."""
        per_minute = self._per_minute(what)
        if per_minute is None:
            return True, 0.0
        name = f"{self.key}:{what}"
        wait = await self.bucket_store.run(
            lambda b: b.reserve(name, per_minute, amount, max_wait), deadline
        )
        if wait is None:  # a Buckets that does not tell its wait: at least the amount's
            return False, 0.0 if max_wait < 0 else bucket_wait(0.0, per_minute, amount)
        return wait <= max_wait, float(wait)

    def _refused(self, what: str, retry_after: float | None) -> RateLimitError:
        how = "at once" if self.limits.on_limit == "fail" else "before the call's deadline"
        return RateLimitError(
            f"client-side limit on {what} for {self.key} reached; no room {how}",
            retry_after_seconds=retry_after,
            provider=self.key.partition(":")[0],
        )
