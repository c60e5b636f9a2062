"""Client-side limits: concurrency, requests and tokens per minute, waiting or failing, shared
through Redis; and the router skipping a model whose limits refuse a call."""

from __future__ import annotations

from typing import Any

import anyio
import coredis
import pytest

from metis.errors import ErrorClass, RateLimitError
from metis.model.response import TokenUsage
from metis.redis.limits import RedisBuckets, RedisSlots
from metis.routing import InMemoryBuckets, Limiter, Limits, Router
from metis.routing.limits import InMemorySlots
from metis.routing.shared_state import Fallback
from metis.telemetry import AvailabilityChanged, ListSink, RouteDecided
from metis.testing.emulator import Emulator

from .. import routing_redis
from ..routing_helpers import MODELS, ask, emulated

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for


redis_port = routing_redis.redis_port
redis_prefix = routing_redis.redis_prefix
CALLS = 200
STORE_TIMEOUT = 30.0
"""The limiters' wait for one Redis operation in these tests (a bound on a hang, not a timing):
with a router's 1 s, a loaded machine's late answer sent a worker to its own count."""


def patient(store: RedisBuckets | RedisSlots) -> Fallback[Any]:
    """``store`` as a limiter holds it, its operations bounded by :data:`STORE_TIMEOUT`."""
    if isinstance(store, RedisSlots):
        return Fallback("slots", store, InMemorySlots(), timeout=STORE_TIMEOUT)
    return Fallback("buckets", store, InMemoryBuckets(), timeout=STORE_TIMEOUT)


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


async def run_all(limiter: Limiter, *, deadline: float, hold: anyio.Event | None = None):
    """CALLS concurrent calls; how many got in, the errors of the others, the peak in flight."""
    admitted: list[int] = []
    errors: list[RateLimitError] = []
    flight = [0, 0]

    async def one(i: int) -> None:
        try:
            async with limiter.admit(10, anyio.current_time() + deadline):
                admitted.append(i)
                flight[0] += 1
                flight[1] = max(flight)
                if hold is not None:
                    await hold.wait()
                await anyio.sleep(0.001)
                flight[0] -= 1
        except RateLimitError as error:
            errors.append(error)

    async with anyio.create_task_group() as group:
        for i in range(CALLS):
            group.start_soon(one, i)
        if hold is not None:
            await anyio.sleep(0.2)
            hold.set()
    return admitted, errors, flight[1]


@pytest.mark.anyio
async def test_200_concurrent_calls_wait_for_one_of_10_slots() -> None:
    limiter = Limiter("anthropic", Limits(max_concurrent=10))
    with anyio.fail_after(30):
        admitted, errors, peak = await run_all(limiter, deadline=30)
    assert len(admitted) == CALLS and not errors
    assert peak == 10


@pytest.mark.anyio
async def test_200_concurrent_calls_fail_at_once_beyond_the_slots_when_so_configured() -> None:
    limiter = Limiter("anthropic", Limits(max_concurrent=10, on_limit="fail"))
    with anyio.fail_after(30):
        admitted, errors, peak = await run_all(limiter, deadline=30, hold=anyio.Event())
    assert len(admitted) == 10 and len(errors) == CALLS - 10 and peak == 10
    assert all(e.error_class is ErrorClass.RATE_LIMIT for e in errors)
    assert "concurrent calls for anthropic" in errors[0].message


@pytest.mark.anyio
async def test_requests_per_minute_admit_a_burst_then_refuse() -> None:
    limits = Limits(requests_per_minute=50, on_limit="fail")
    limiter = Limiter("openai:gpt-4o", limits, InMemoryBuckets(clock=Clock()))
    with anyio.fail_after(30):
        admitted, errors, _ = await run_all(limiter, deadline=30)
    assert len(admitted) == 50 and len(errors) == CALLS - 50
    assert errors[0].retry_after_seconds == pytest.approx(1.2)  # one request at 50 a minute


@pytest.mark.anyio
async def test_a_call_that_cannot_get_in_before_its_deadline_fails_without_waiting() -> None:
    # one a second after the burst; the buckets' clock stands still, so none refills meanwhile
    limiter = Limiter("gemini", Limits(requests_per_minute=60), InMemoryBuckets(clock=Clock()))
    started = anyio.current_time()
    with anyio.fail_after(30):
        admitted, errors, _ = await run_all(limiter, deadline=0.5)
    assert len(admitted) == 60 and len(errors) == CALLS - 60
    assert "before the call's deadline" in errors[0].message
    assert anyio.current_time() - started < 5.0


@pytest.mark.anyio
async def test_a_call_waits_for_tokens_within_its_deadline() -> None:
    limiter = Limiter("openai", Limits(tokens_per_minute=6000))  # 100 tokens a second
    async with limiter.admit(6000, anyio.current_time() + 5):
        pass  # the bucket is empty now
    started = anyio.current_time()
    with anyio.fail_after(5):
        async with limiter.admit(20, anyio.current_time() + 5):
            waited = anyio.current_time() - started
    assert waited >= 0.1  # 0.2 s for 20 tokens, less what refilled before ``started``


@pytest.mark.anyio
async def test_a_call_larger_than_the_whole_token_bucket_goes_once_it_is_full_and_leaves_debt() -> (
    None
):
    clock = Clock()
    buckets = InMemoryBuckets(clock=clock)
    limiter = Limiter("openai", Limits(tokens_per_minute=1000, on_limit="fail"), buckets)
    async with limiter.admit(5000):  # five minutes' worth, into a full bucket: it goes
        pass
    with pytest.raises(RateLimitError):
        async with limiter.admit(10):
            pass
    assert await buckets.reserve("openai:tokens", 1000, 10, 240) == pytest.approx(240.6)  # debt
    clock.now += 241  # 4010 tokens refilled
    async with limiter.admit(10):
        pass
    clock.now += 60  # full again
    assert await buckets.reserve("openai:tokens", 1000, 5000, 0) == 0.0
    assert await buckets.reserve("openai:tokens", 1000, 5000, 10) == 300.0  # full after debt


@pytest.mark.anyio
async def test_reported_usage_corrects_the_estimate() -> None:
    clock = Clock()
    buckets = InMemoryBuckets(clock=clock)
    limiter = Limiter("anthropic", Limits(tokens_per_minute=1000, on_limit="fail"), buckets)
    async with limiter.admit(100) as admitted:
        await admitted.settle(TokenUsage(input_tokens=450, output_tokens=150))
    # 1000 - 600 really used: 400 left, not the 900 the estimate alone would leave
    assert await buckets.reserve("anthropic:tokens", 1000, 401, 0) == pytest.approx(0.06)
    assert await buckets.reserve("anthropic:tokens", 1000, 400, 0) == 0.0
    clock.now += 6  # refills 100
    assert await buckets.reserve("anthropic:tokens", 1000, 100, 0) == 0.0


@pytest.mark.anyio
async def test_workers_share_requests_per_minute_through_redis(
    redis_port: int, redis_prefix: str
) -> None:
    limits = Limits(requests_per_minute=20, on_limit="fail")
    clock = Clock()  # no refill while the calls run, however slowly they go
    async with coredis.Redis(port=redis_port) as one, coredis.Redis(port=redis_port) as two:
        # Redis's answer waited for as long as the test may run: on a loaded machine one
        # slower than the router's 1 s made a worker count alone (40 admitted, at load 25)
        workers = [
            Limiter(
                "openai", limits, patient(RedisBuckets(client, prefix=redis_prefix, clock=clock))
            )
            for client in (one, two)
        ]
        admitted: list[int] = []

        async def call(worker: Limiter) -> None:
            try:
                async with worker.admit(10):
                    admitted.append(1)
            except RateLimitError:
                pass

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for i in range(60):  # 30 a worker: 40 admitted if each kept its own count
                    group.start_soon(call, workers[i % 2])
    assert not [w for w in workers if w.bucket_store.degraded]  # each asked Redis, every time
    assert len(admitted) == 20


@pytest.mark.anyio
async def test_redis_buckets_are_corrected_by_usage(redis_port: int, redis_prefix: str) -> None:
    clock = Clock()
    async with coredis.Redis(port=redis_port) as client:
        buckets = RedisBuckets(client, prefix=redis_prefix, clock=clock)
        assert await buckets.reserve("t", 1000, 100, 0) == 0.0
        await buckets.give_back("t", 1000, -500)  # really used 600
        assert await buckets.reserve("t", 1000, 401, 0) == pytest.approx(0.06)
        assert await buckets.reserve("t", 1000, 401, 10) == pytest.approx(0.06)


@pytest.mark.anyio
async def test_the_router_skips_a_model_whose_limits_refuse(emulator: Emulator) -> None:
    sink = ListSink()
    route = Router(
        [MODELS["anthropic"], MODELS["openai"]],
        adapters=emulated(emulator),
        limits={"anthropic": Limits(requests_per_minute=1, on_limit="fail")},
        telemetry=sink,
    )
    with anyio.fail_after(20):
        assert (await route.complete(ask())).provider == "anthropic"
        assert (await route.complete(ask())).provider == "openai"
    second = [e for e in sink.events if isinstance(e, RouteDecided)][1]
    assert second.steps[0][:2] == (MODELS["anthropic"], "skipped")
    assert "client-side limit on requests per minute" in second.steps[0][2]
    assert not [e for e in sink.events if isinstance(e, AvailabilityChanged)]


@pytest.mark.anyio
async def test_the_router_corrects_the_token_bucket_with_the_reply_usage(
    emulator: Emulator,
) -> None:
    clock = Clock()
    buckets = InMemoryBuckets(clock=clock)
    route = Router(
        [MODELS["gemini"]],
        adapters=emulated(emulator),
        limits={MODELS["gemini"]: Limits(tokens_per_minute=100_000)},
        buckets=buckets,
    )
    with anyio.fail_after(20):
        usage = (await route.complete(ask())).usage
    used = usage.total_input_tokens + usage.output_tokens
    name = f"{MODELS['gemini']}:tokens"
    assert await buckets.reserve(name, 100_000, 100_000 - used + 1, 0) > 0  # refused: a wait
    assert await buckets.reserve(name, 100_000, 100_000 - used, 0) == 0.0


@pytest.mark.anyio
async def test_a_call_cancelled_while_waiting_gives_its_budget_back() -> None:
    clock = Clock()
    buckets = InMemoryBuckets(clock=clock)
    limiter = Limiter("openai", Limits(requests_per_minute=1, tokens_per_minute=600), buckets)
    async with limiter.admit(100):
        pass  # the only request of this minute
    with anyio.move_on_after(0.05):
        async with limiter.admit(100):  # waits a minute for its request
            pytest.fail("admitted")
    clock.now += 60  # one request refilled, and the tokens: none were spent by the waiter
    assert await buckets.reserve("openai:requests", 1, 1, 0) == 0.0
    assert await buckets.reserve("openai:tokens", 600, 600, 0) == 0.0


@pytest.mark.anyio
async def test_a_slot_may_be_released_from_another_task_than_took_it() -> None:
    limiter = Limiter("openai", Limits(max_concurrent=1))
    context = limiter.admit(10)
    await context.__aenter__()

    async def leave() -> None:
        await context.__aexit__(None, None, None)

    async with anyio.create_task_group() as group:
        group.start_soon(leave)
    with anyio.fail_after(5):
        async with limiter.admit(10):
            pass


@pytest.mark.anyio
async def test_workers_share_concurrent_slots_through_redis(
    redis_port: int, redis_prefix: str
) -> None:
    limits = Limits(max_concurrent=5)
    in_flight = [0, 0]
    done: list[int] = []
    full = anyio.Event()  # the five slots are all held: nobody leaves before that
    async with coredis.Redis(port=redis_port) as one, coredis.Redis(port=redis_port) as two:
        workers = [
            Limiter(
                "anthropic", limits, shared_slots=patient(RedisSlots(client, prefix=redis_prefix))
            )
            for client in (one, two)
        ]

        async def call(worker: Limiter) -> None:
            async with worker.admit(10, anyio.current_time() + 30):
                in_flight[0] += 1
                in_flight[1] = max(in_flight)
                if in_flight[0] == 5:
                    full.set()
                await full.wait()
                await anyio.sleep(0.02)  # room for a sixth, were the count not shared
                in_flight[0] -= 1
                done.append(1)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for i in range(12):  # 6 a worker: 10 at once if each kept its own count
                    group.start_soon(call, workers[i % 2])
        assert not [w for w in workers if w.slot_store and w.slot_store.degraded]
        assert len(done) == 12 and in_flight[1] == 5
        assert await one.zcard(redis_prefix + "anthropic:slots") == 0  # every lease given back


@pytest.mark.anyio
async def test_a_dead_workers_slot_expires(redis_port: int, redis_prefix: str) -> None:
    clock = Clock()
    async with coredis.Redis(port=redis_port) as client:
        slots = RedisSlots(client, prefix=redis_prefix, clock=clock)
        assert await slots.take("s:slots", 1, "dead-worker", lease_seconds=30)
        assert not await slots.take("s:slots", 1, "alive", lease_seconds=30)
        limits = Limits(max_concurrent=1, on_limit="fail")
        limiter = Limiter("s", limits, shared_slots=patient(slots))
        with pytest.raises(RateLimitError, match="concurrent calls"):
            async with limiter.admit(1):
                pass
        clock.now += 31
        assert await slots.take("s:slots", 1, "alive", lease_seconds=30)


@pytest.fixture(params=["memory", "redis"])
async def debt_buckets(request: pytest.FixtureRequest, redis_prefix: str):
    """A clock and buckets on it, in this process or in a real redis-server."""
    clock = Clock()
    if request.param == "memory":
        yield clock, InMemoryBuckets(clock=clock)
        return
    port = request.getfixturevalue("redis_port")
    async with coredis.Redis(port=port) as client:
        yield clock, patient(RedisBuckets(client, prefix=redis_prefix, clock=clock))


async def refused_wait(limiter: Limiter, estimate: int) -> float:
    with pytest.raises(RateLimitError) as refused:
        async with limiter.admit(estimate):
            pass
    assert refused.value.retry_after_seconds is not None
    return refused.value.retry_after_seconds


@pytest.mark.anyio
async def test_a_bucket_in_debt_tells_the_wait_until_the_call_would_be_admitted(
    debt_buckets: tuple[Clock, InMemoryBuckets | Fallback],
) -> None:
    """A reply's usage is charged after it ends, so the bucket may owe more than it holds: the
    wait told is until the debt is paid and the call's tokens refilled, not the tokens' alone
    (a caller told that retried, was refused again, and again)."""
    clock, buckets = debt_buckets
    limiter = Limiter("openai", Limits(tokens_per_minute=1000, on_limit="fail"), buckets)
    async with limiter.admit(100) as admitted:  # the reply really used 5000
        await admitted.settle(TokenUsage(input_tokens=1000, output_tokens=4000))
    told = await refused_wait(limiter, 10)
    assert told == pytest.approx((4000 + 10) * 60 / 1000)
    clock.now += told - 1.0
    assert await refused_wait(limiter, 10) == pytest.approx(1.0)
    clock.now += 1.0
    async with limiter.admit(10):
        pass


@pytest.mark.anyio
async def test_a_refusal_for_requests_tells_the_longer_wait_of_the_tokens_in_debt(
    debt_buckets: tuple[Clock, InMemoryBuckets | Fallback],
) -> None:
    clock, buckets = debt_buckets
    limits = Limits(requests_per_minute=1, tokens_per_minute=1000, on_limit="fail")
    limiter = Limiter("openai", limits, buckets)
    async with limiter.admit(5000):  # larger than the bucket: goes when full, 4000 in debt
        pass
    told = await refused_wait(limiter, 10)  # the request's wait is 60 s
    assert told == pytest.approx((4000 + 10) * 60 / 1000)
    clock.now += told
    async with limiter.admit(10):
        pass
