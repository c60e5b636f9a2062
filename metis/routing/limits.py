"""Client-side limits per provider or model: concurrent calls, requests and tokens per minute.

A call is admitted when a concurrency slot is free (an anyio capacity limiter) and both token
buckets can give it what it needs: one request, and its input-token estimate. The buckets
reserve first and wait out any debt, so callers are served in the order they asked; a call
that could not be served before its deadline (or at once, with ``on_limit: fail``) fails with
a ``rate_limit`` error and takes nothing. When the call ends, the token bucket is corrected by
the usage the provider reported (input and output tokens, instead of the estimate).

Buckets and slots live in memory by default; :class:`~metis.redis.limits.RedisBuckets`
and :class:`~metis.redis.limits.RedisSlots` share them across worker processes (a
shared slot is a lease that ends with the call, or at its deadline if the worker died).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from metis.core.options import checked_init
from metis.errors import RateLimitError
from metis.model.response import TokenUsage


@checked_init
class Limits(BaseModel):
    """The limits of one provider or model (``limits:`` in a route of models.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: int | None = Field(default=None, ge=1)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    on_limit: Literal["wait", "fail"] = "wait"
    """wait: up to the call's deadline; fail: a rate_limit error at once."""


class Buckets(Protocol):
    """Token buckets by name, refilled at ``per_minute / 60`` a second up to ``per_minute``."""

    async def reserve(
        self, name: str, per_minute: float, amount: float, max_wait: float
    ) -> float | None:
        """Take ``amount``; the seconds to wait before using it, or None (nothing taken) when
        that would be more than ``max_wait``."""
        ...

    async def give_back(self, name: str, per_minute: float, amount: float) -> None:
        """Return ``amount`` (negative: take more), never above the bucket's size."""
        ...


class SharedSlots(Protocol):
    """Concurrency slots shared by processes: leases that end when given back or expire."""

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        """Take one of ``limit`` slots for ``holder``; False when all are held."""
        ...

    async def give_back(self, name: str, holder: str) -> None: ...


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
        bucket = self._refilled(name, per_minute)
        wait = bucket_wait(bucket.level, per_minute, amount)
        if wait > max_wait:
            return None
        bucket.level -= amount
        return wait

    async def give_back(self, name: str, per_minute: float, amount: float) -> None:
        bucket = self._refilled(name, per_minute)
        bucket.level = min(per_minute, bucket.level + amount)


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
        if self.settled or usage is None or self.limiter.limits.tokens_per_minute is None:
            return
        self.settled = True
        used = usage.total_input_tokens + usage.output_tokens
        await self.limiter.buckets.give_back(
            f"{self.limiter.key}:tokens",
            self.limiter.limits.tokens_per_minute,
            self.estimate - used,
        )


@checked_init
class Limiter:
    """Admits calls to one provider or model (``key``) within its :class:`Limits`."""

    def __init__(
        self,
        key: str,
        limits: Limits,
        buckets: Buckets | None = None,
        shared_slots: SharedSlots | None = None,
    ) -> None:
        self.key = key
        self.limits = limits
        self.buckets: Buckets = buckets or InMemoryBuckets()
        self.shared_slots = shared_slots
        self._slots: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return f"<Limiter {self.key}: {self.limits!r}>"

    @asynccontextmanager
    async def admit(self, estimate: int, deadline: float = math.inf) -> AsyncIterator[Admitted]:
        """Hold a slot and the budget for one call of about ``estimate`` input tokens."""
        async with AsyncExitStack() as stack:
            if self.limits.max_concurrent is not None and self.shared_slots is not None:
                holder = uuid.uuid4().hex
                await self._shared_slot(deadline, holder)
                stack.push_async_callback(self._give_slot_back, holder)
            elif self.limits.max_concurrent is not None:
                borrower = object()  # not the task: a stream may be read from several tasks
                await self._slot(deadline, borrower)
                stack.callback(self._limiter().release_on_behalf_of, borrower)
            request_wait = await self._take(
                "requests", self.limits.requests_per_minute, 1, deadline
            )
            try:
                token_wait = await self._take(
                    "tokens", self.limits.tokens_per_minute, estimate, deadline
                )
            except RateLimitError:
                if self.limits.requests_per_minute is not None:
                    await self.buckets.give_back(
                        f"{self.key}:requests", self.limits.requests_per_minute, 1
                    )
                raise
            try:
                await anyio.sleep(max(request_wait, token_wait))
            except BaseException:  # cancelled while waiting its turn: it used nothing
                with anyio.CancelScope(shield=True):
                    await self._give_back(estimate)
                raise
            yield Admitted(self, estimate)

    async def _give_back(self, estimate: int) -> None:
        if self.limits.requests_per_minute is not None:
            await self.buckets.give_back(f"{self.key}:requests", self.limits.requests_per_minute, 1)
        if self.limits.tokens_per_minute is not None:
            await self.buckets.give_back(
                f"{self.key}:tokens", self.limits.tokens_per_minute, estimate
            )

    async def _slot(self, deadline: float, borrower: object) -> None:
        slots = self._limiter()
        try:
            slots.acquire_on_behalf_of_nowait(borrower)
            return
        except anyio.WouldBlock:
            if self.limits.on_limit == "fail":
                raise self._refused("concurrent calls", None) from None
        with anyio.move_on_after(deadline - anyio.current_time()):
            await slots.acquire_on_behalf_of(borrower)
            return
        raise self._refused("concurrent calls", None)

    async def _shared_slot(self, deadline: float, holder: str) -> None:
        assert self.shared_slots is not None and self.limits.max_concurrent is not None
        lease = (deadline - anyio.current_time() if math.isfinite(deadline) else 600.0) + 30.0
        while not await self.shared_slots.take(
            f"{self.key}:slots", self.limits.max_concurrent, holder, lease
        ):
            if self.limits.on_limit == "fail":
                raise self._refused("concurrent calls", None)
            if anyio.current_time() + SHARED_SLOT_POLL_SECONDS > deadline:
                raise self._refused("concurrent calls", None)
            await anyio.sleep(SHARED_SLOT_POLL_SECONDS)

    async def _give_slot_back(self, holder: str) -> None:
        assert self.shared_slots is not None
        with anyio.CancelScope(shield=True):
            await self.shared_slots.give_back(f"{self.key}:slots", holder)

    def _limiter(self) -> anyio.CapacityLimiter:
        if self._slots is None:
            self._slots = anyio.CapacityLimiter(self.limits.max_concurrent or 1)
        return self._slots

    async def _take(
        self, what: str, per_minute: float | None, amount: int, deadline: float
    ) -> float:
        if per_minute is None:
            return 0.0
        max_wait = 0.0 if self.limits.on_limit == "fail" else deadline - anyio.current_time()
        wait = await self.buckets.reserve(f"{self.key}:{what}", per_minute, amount, max_wait)
        if wait is None:
            retry_after = bucket_wait(0.0, per_minute, amount)
            raise self._refused(f"{what} per minute", retry_after)
        return wait

    def _refused(self, what: str, retry_after: float | None) -> RateLimitError:
        how = "at once" if self.limits.on_limit == "fail" else "before the call's deadline"
        return RateLimitError(
            f"client-side limit on {what} for {self.key} reached; no room {how}",
            retry_after_seconds=retry_after,
            provider=self.key.partition(":")[0],
        )
