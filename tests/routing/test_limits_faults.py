"""Shared concurrency slots when a call leaves while Redis is taking its slot: the take ran on
the server, its reply never reached the call (the caller cancelled it, or its deadline came).
The lease is given back, not held until it expires (the call's deadline plus 30 s: ten
minutes by default), so a gateway whose clients leave while waiting keeps its slots."""

from __future__ import annotations

from typing import Any

import anyio
import coredis
import pytest

from metis.redis.limits import RedisSlots
from metis.routing import Limiter, Limits
from metis.routing.limits import InMemorySlots
from metis.routing.shared_state import Fallback

from .. import routing_redis

redis_port = routing_redis.redis_port
redis_prefix = routing_redis.redis_prefix


class ReplyLost:
    """RedisSlots whose take runs on the server and then never answers."""

    def __init__(self, slots: RedisSlots) -> None:
        self.slots = slots
        self.taken = anyio.Event()

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        await self.slots.take(name, limit, holder, lease_seconds)
        self.taken.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def give_back(self, name: str, holder: str) -> None:
        await self.slots.give_back(name, holder)


TAKEN_WITHIN = (0.25, 1.0, 5.0, 25.0)
"""Seconds Redis is given to take a slot before the call's deadline comes, one try each until
it took the slot in time (a loaded machine's Redis may not, in a quarter second)."""


def as_routers(store: ReplyLost) -> Any:
    """The store as a router holds it: this process's slots standing in when it fails."""
    return Fallback("slots", store, InMemorySlots(), route="r", timeout=30.0)


@pytest.mark.anyio
async def test_a_call_cancelled_as_redis_takes_its_slot_gives_the_slot_back(
    redis_port: int, redis_prefix: str
) -> None:
    async with coredis.Redis(port=redis_port) as client:
        store = ReplyLost(RedisSlots(client, prefix=redis_prefix))
        limiter = Limiter("openai", Limits(max_concurrent=2), shared_slots=as_routers(store))

        async def call(scope: anyio.CancelScope) -> None:
            with scope:
                async with limiter.admit(10):
                    raise AssertionError("admitted with no reply")

        scope = anyio.CancelScope()
        async with anyio.create_task_group() as group:
            group.start_soon(call, scope)
            await store.taken.wait()
            scope.cancel()
        assert await client.zcard(redis_prefix + "openai:slots") == 0


@pytest.mark.anyio
async def test_a_call_whose_deadline_comes_as_redis_takes_its_slot_gives_it_back(
    redis_port: int, redis_prefix: str
) -> None:
    async with coredis.Redis(port=redis_port) as client:
        for attempt, seconds in enumerate(TAKEN_WITHIN):
            prefix = f"{redis_prefix}{attempt}:"  # a late take of a try before counts apart
            store = ReplyLost(RedisSlots(client, prefix=prefix))
            limiter = Limiter("openai", Limits(max_concurrent=2), shared_slots=as_routers(store))
            # admitted on this process's slots once the deadline comes
            async with limiter.admit(10, anyio.current_time() + seconds):
                pass
            if store.taken.is_set():  # Redis took the slot before the deadline
                break
        assert store.taken.is_set()
        assert await client.zcard(prefix + "openai:slots") == 0


class Hanging:
    """Buckets and slots that never answer."""

    async def reserve(self, name: str, per_minute: float, amount: float, max_wait: float) -> Any:
        await anyio.sleep_forever()

    async def give_back(self, *args: Any) -> None:
        await anyio.sleep_forever()

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.mark.anyio
async def test_a_limiter_given_shared_stores_itself_is_not_held_by_one_that_hangs() -> None:
    """A Limiter built with Redis stores (an embedder's, not a router's) bounds each store
    operation and stands in with this process's own, as a router does; it waited forever."""
    limits = Limits(max_concurrent=1, tokens_per_minute=1_000)
    limiter = Limiter("openai", limits, buckets=Hanging(), shared_slots=Hanging())
    with anyio.fail_after(30):
        for _ in range(2):
            async with limiter.admit(10, anyio.current_time() + 20) as admitted:
                assert admitted.estimate == 10
