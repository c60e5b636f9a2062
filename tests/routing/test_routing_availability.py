"""Availability per (platform, model): the state machine on a fake clock, in memory and in a
real redis-server (the same rules, shared by workers)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import coredis
import pytest

from metis.errors import ErrorClass
from metis.redis.availability import RedisAvailability
from metis.routing import CooldownPolicy, InMemoryAvailability, Router, State
from metis.routing.availability import AvailabilityStore
from metis.telemetry import ListSink, RouteDecided
from metis.testing.emulator import Emulator

from .. import routing_redis
from ..routing_helpers import MODELS, ask, emulated

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

redis_port = routing_redis.redis_port
redis_prefix = routing_redis.redis_prefix
KEY = "anthropic:claude-sonnet-4-5"
POLICY = CooldownPolicy(max_seconds=60.0, probe_timeout=30.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def store(
    kind: str, clock: Callable[[], float], port: int, prefix: str
) -> AsyncIterator[AvailabilityStore]:
    if kind == "memory":
        yield InMemoryAvailability(POLICY, clock=clock)
        return
    async with coredis.Redis(port=port) as client:
        yield RedisAvailability(client, POLICY, prefix=prefix, clock=clock)


@pytest.fixture(params=["memory", "redis"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def port(kind: str, request: pytest.FixtureRequest) -> int:
    return int(request.getfixturevalue("redis_port")) if kind == "redis" else 0


@pytest.mark.anyio
async def test_a_failure_cools_down_then_one_probe_is_let_through(
    kind: str, port: int, redis_prefix: str
) -> None:
    clock = Clock()
    async with store(kind, clock, port, redis_prefix) as availability:
        admission, change = await availability.admit(KEY)
        assert admission.admitted and not admission.probe and change is None

        change = await availability.failed(KEY, ErrorClass.OVERLOADED, None)
        assert change is not None
        assert (change.old.state, change.new.state, change.reason) == (
            State.AVAILABLE,
            State.COOLING_DOWN,
            "overloaded",
        )
        assert change.cooldown_seconds == 10.0

        clock.now += 9.5
        admission, _ = await availability.admit(KEY)
        assert not admission.admitted and admission.wait_seconds == pytest.approx(0.5)
        assert admission.reason == "cooling down (0.5 s left)"

        clock.now += 0.5
        admission, change = await availability.admit(KEY)
        assert admission.admitted and admission.probe
        assert change is not None and change.new.state is State.PROBING
        other, _ = await availability.admit(KEY)  # while the probe runs, the others skip
        assert not other.admitted and other.reason == "another call is probing it"

        change = await availability.succeeded(KEY)
        assert change is not None and change.new.state is State.AVAILABLE
        record = await availability.record(KEY)
        assert record.state is State.AVAILABLE and record.failures == 0


@pytest.mark.anyio
async def test_repeated_failures_lengthen_the_cool_down_and_a_success_resets_it(
    kind: str, port: int, redis_prefix: str
) -> None:
    clock = Clock()
    async with store(kind, clock, port, redis_prefix) as availability:
        seconds = []
        for _ in range(5):
            change = await availability.failed(KEY, ErrorClass.SERVER_ERROR, None)
            assert change is not None
            seconds.append(change.cooldown_seconds)
        assert seconds == [5.0, 10.0, 20.0, 40.0, 60.0]  # doubling, capped
        assert (await availability.record(KEY)).failures == 5

        await availability.succeeded(KEY)
        change = await availability.failed(KEY, ErrorClass.SERVER_ERROR, None)
        assert change is not None and change.cooldown_seconds == 5.0


@pytest.mark.anyio
async def test_retry_after_sets_the_cool_down_when_longer(
    kind: str, port: int, redis_prefix: str
) -> None:
    clock = Clock()
    async with store(kind, clock, port, redis_prefix) as availability:
        long = await availability.failed(KEY, ErrorClass.RATE_LIMIT, 42.0)
        assert long is not None and long.cooldown_seconds == 42.0
        assert (await availability.record(KEY)).until == clock.now + 42.0
        await availability.succeeded(KEY)
        short = await availability.failed(KEY, ErrorClass.RATE_LIMIT, 1.0)
        assert short is not None and short.cooldown_seconds == 5.0


@pytest.mark.anyio
async def test_a_lost_or_abandoned_probe_frees_the_model_for_another(
    kind: str, port: int, redis_prefix: str
) -> None:
    clock = Clock()
    async with store(kind, clock, port, redis_prefix) as availability:
        await availability.failed(KEY, ErrorClass.NETWORK, None)
        clock.now += 5
        assert (await availability.admit(KEY))[0].probe
        clock.now += POLICY.probe_timeout  # its caller vanished without a verdict
        assert (await availability.admit(KEY))[0].probe

        change = await availability.abandoned(KEY)  # its caller was cancelled
        assert change is not None and change.new.state is State.COOLING_DOWN
        again, _ = await availability.admit(KEY)
        assert again.probe
        change = await availability.failed(KEY, ErrorClass.NETWORK, None)
        assert change is not None and change.cooldown_seconds == 10.0  # a failed probe


@pytest.mark.anyio
async def test_workers_sharing_redis_see_one_state_and_take_one_probe(
    redis_port: int,
    redis_prefix: str,
) -> None:
    clock = Clock()
    async with (
        coredis.Redis(port=redis_port) as one,
        coredis.Redis(port=redis_port) as two,
    ):
        first = RedisAvailability(one, POLICY, prefix=redis_prefix, clock=clock)
        second = RedisAvailability(two, POLICY, prefix=redis_prefix, clock=clock)
        await first.failed(KEY, ErrorClass.OVERLOADED, None)
        assert not (await second.admit(KEY))[0].admitted
        clock.now += 10
        probes: list[bool] = []

        async def try_once(worker: RedisAvailability) -> None:
            probes.append((await worker.admit(KEY))[0].admitted)

        async with anyio.create_task_group() as group:
            for i in range(40):
                group.start_soon(try_once, first if i % 2 else second)
        assert probes.count(True) == 1


@pytest.mark.anyio
async def test_routers_in_two_workers_share_a_cool_down_through_redis(
    emulator: Emulator,
    redis_port: int,
    redis_prefix: str,
) -> None:
    async with (
        coredis.Redis(port=redis_port) as one,
        coredis.Redis(port=redis_port) as two,
    ):
        sinks = ListSink(), ListSink()
        routers = [
            Router(
                [MODELS["anthropic"], MODELS["openai"]],
                adapters=emulated(emulator),
                max_retries=0,
                availability=RedisAvailability(client, prefix=redis_prefix),
                telemetry=sink,
                # what is shared is the subject, not how long Redis may take on a loaded
                # machine (past the default 1 s a router keeps its own state)
                shared_state_timeout=30,
            )
            for client, sink in zip((one, two), sinks, strict=True)
        ]
        emulator.push_fault("overloaded", provider="anthropic")
        with anyio.fail_after(20):
            assert (await routers[0].complete(ask())).provider == "openai"
            assert (await routers[1].complete(ask())).provider == "openai"
    (decided,) = [e for e in sinks[1].events if isinstance(e, RouteDecided)]
    assert decided.steps[0][1] == "skipped" and "cooling down" in decided.steps[0][2]
    assert [r.provider for r in emulator.requests] == ["anthropic", "openai", "openai"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "left",
    [
        {"state": "asleep", "failures": "1", "until": "0"},
        {"state": "cooling_down", "failures": "many", "until": "0"},
        {"state": "cooling_down"},
        {"other": "field"},
    ],
)
async def test_a_record_redis_holds_that_no_router_wrote_is_a_protocol_error(
    redis_port: int, redis_prefix: str, left: dict[str, str]
) -> None:
    """Someone else's hash under a model's key: reading it back says so, naming the key
    (before: a bare ValueError or KeyError)."""
    from metis.errors import ProtocolError

    async with coredis.Redis(port=redis_port) as client:
        await client.hset(redis_prefix + KEY, left)
        shared = RedisAvailability(client, POLICY, prefix=redis_prefix)
        with pytest.raises(ProtocolError, match=KEY):
            await shared.record(KEY)
