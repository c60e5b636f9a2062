"""A router whose availability, buckets and slots live in Redis keeps serving when Redis fails:
killed or paused mid-call, down before the call, or a store that never answers. Each operation
is bounded, the answer the provider gave is never lost, the router goes on with its own state
(one WARNING and a telemetry event), and goes back to the shared state when Redis answers."""

from __future__ import annotations

import logging
import math
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

coredis = pytest.importorskip("coredis")

import metis.routing.shared_state as shared_state  # noqa: E402
from metis.errors import ErrorClass  # noqa: E402
from metis.model import MessageComplete  # noqa: E402
from metis.redis.availability import RedisAvailability  # noqa: E402
from metis.redis.limits import RedisBuckets, RedisSlots  # noqa: E402
from metis.routing import Limits, Router, State  # noqa: E402
from metis.routing.availability import Admission, AvailabilityRecord, Change  # noqa: E402
from metis.routing.shared_state import Fallback  # noqa: E402
from metis.telemetry import (  # noqa: E402
    CallStarted,
    ListSink,
    SharedStateChanged,
    TelemetryEvent,
)
from metis.testing.emulator import Emulator  # noqa: E402

from ..redis_servers import RedisFactory, RedisProcess  # noqa: E402
from ..routing_helpers import MODELS, ask, emulated  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

DEADLINE = 20.0
BOUND = 30.0  # the router's wait for one Redis operation that answers: a bound on a hang
MID_CALL_BOUND = 0.2
"""Its wait when the test kills or pauses Redis mid-call: after a pause, each store the call
touches waits this long once. Redis answers the operations before the fault on a connection
already open; were one of them slower than this, it would go local before the call, and the
test still hold."""
HANG_BOUND = 0.05  # its wait for a store that never answers: any bound ends it


@pytest.fixture(scope="module")
def servers() -> Iterator[RedisFactory]:
    factory = RedisFactory()
    yield factory
    factory.close()


@pytest.fixture
def server(servers: RedisFactory) -> Iterator[RedisProcess]:
    process = servers.server()
    yield process
    if process.proc is not None and process.proc.poll() is None:
        os.kill(process.proc.pid, signal.SIGCONT)  # a paused one stops like any other
    process.stop()


class OnCallStarted:
    """An adapter's telemetry sink that acts as the call is sent (Redis is answered by then)."""

    def __init__(self, act: Callable[[], None]) -> None:
        self.act = act

    def emit(self, event: TelemetryEvent) -> None:
        if isinstance(event, CallStarted):
            self.act()


@asynccontextmanager
async def shared_router(
    emulator: Emulator, server: RedisProcess, sink: ListSink, bound: float = BOUND
) -> AsyncIterator[Router]:
    """A router of two models whose availability, buckets and slots are in ``server``, each
    operation on them bounded by ``bound`` seconds."""
    async with coredis.Redis(port=server.port) as client:
        await client.ping()  # connected before the router's first operation
        try:
            yield Router(
                [MODELS["anthropic"], MODELS["openai"]],
                adapters=emulated(emulator),
                availability=RedisAvailability(client),
                buckets=RedisBuckets(client),
                slots=RedisSlots(client),
                limits={
                    "anthropic": Limits(max_concurrent=4, tokens_per_minute=1_000_000),
                    "openai": Limits(max_concurrent=4, requests_per_minute=600),
                },
                telemetry=sink,
                shared_state_timeout=bound,
            )
        finally:
            if server.proc is not None and server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGCONT)  # the client's exit talks to it


async def call(route: Router, streaming: bool) -> str:
    if not streaming:
        return (await route.complete(ask())).provider
    events = [event async for event in route.stream(ask())]
    assert isinstance(events[-1], MessageComplete)
    return "streamed"


def went_local(sink: ListSink) -> list[str]:
    return [
        e.store for e in sink.events if isinstance(e, SharedStateChanged) and e.state == "local"
    ]


def shared_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "shared" in r.getMessage()
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("fault", ["killed", "paused"])
async def test_redis_failing_while_the_provider_answers_loses_nothing(
    emulator: Emulator,
    server: RedisProcess,
    caplog: pytest.LogCaptureFixture,
    streaming: bool,
    fault: str,
) -> None:
    sink = ListSink()
    assert server.proc is not None
    pid = server.proc.pid
    act = server.kill if fault == "killed" else lambda: os.kill(pid, signal.SIGSTOP)
    async with shared_router(emulator, server, sink, MID_CALL_BOUND) as route:
        route.targets[0].adapter.telemetry = OnCallStarted(act)
        with anyio.fail_after(DEADLINE), caplog.at_level(logging.INFO, "metis"):
            served = await call(route, streaming)
    assert served in ("anthropic", "streamed")
    assert [r.provider for r in emulator.requests] == ["anthropic"]  # the answer, kept
    assert went_local(sink)  # every store the call touched afterwards
    assert len(shared_warnings(caplog)) == 1


@pytest.mark.anyio
async def test_while_redis_is_down_calls_are_served_and_it_is_used_again_when_back(
    emulator: Emulator,
    server: RedisProcess,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shared_state, "RECHECK_SECONDS", 0.0)  # ask Redis again at once
    sink = ListSink()
    async with shared_router(emulator, server, sink) as route:
        server.kill()
        with anyio.fail_after(DEADLINE), caplog.at_level(logging.INFO, "metis"):
            emulator.push_fault("overloaded", provider="anthropic")
            assert await call(route, streaming=False) == "openai"
            assert await call(route, streaming=False) == "openai"  # cooling down, locally
            assert sorted(set(went_local(sink))) == ["availability", "buckets", "slots"]
            assert len(shared_warnings(caplog)) == 1

            server.start()  # empty, and answering again
            emulator.push_fault("overloaded", provider="anthropic")
            assert await call(route, streaming=False) == "openai"
            states = [e.state for e in sink.events if isinstance(e, SharedStateChanged)]
            assert states[-1] == "shared"
            record = await route.availability.record(MODELS["anthropic"])
            assert record.state is State.COOLING_DOWN, sink.events  # written to Redis again


class Hanging:
    """A shared store that never answers."""

    async def admit(self, key: str) -> tuple[Admission, Change | None]:
        await anyio.sleep_forever()
        raise AssertionError

    async def succeeded(self, key: str) -> Change | None:
        await anyio.sleep_forever()

    async def failed(
        self, key: str, error_class: ErrorClass, retry_after: float | None
    ) -> Change | None:
        await anyio.sleep_forever()

    async def abandoned(self, key: str) -> Change | None:
        await anyio.sleep_forever()

    async def record(self, key: str) -> AvailabilityRecord:
        await anyio.sleep_forever()
        raise AssertionError

    async def reserve(self, name: str, per_minute: float, amount: float, max_wait: float) -> Any:
        await anyio.sleep_forever()

    async def give_back(self, *args: Any) -> None:
        await anyio.sleep_forever()

    async def take(self, name: str, limit: int, holder: str, lease_seconds: float) -> bool:
        await anyio.sleep_forever()
        raise AssertionError


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_a_store_that_never_answers_costs_a_bounded_wait(
    emulator: Emulator, caplog: pytest.LogCaptureFixture, streaming: bool
) -> None:
    sink = ListSink()
    route = Router(
        [MODELS["anthropic"], MODELS["openai"]],
        adapters=emulated(emulator),
        availability=Hanging(),
        buckets=Hanging(),  # type: ignore[arg-type]
        slots=Hanging(),  # type: ignore[arg-type]
        limits={"anthropic": Limits(max_concurrent=1, tokens_per_minute=1_000_000)},
        shared_state_timeout=HANG_BOUND,
    )
    route.telemetry = sink  # set later: its stores report to it too
    with anyio.fail_after(DEADLINE), caplog.at_level(logging.INFO, "metis"):
        for _ in range(3):
            await call(route, streaming)
    assert [r.provider for r in emulator.requests] == ["anthropic"] * 3
    assert sorted(went_local(sink)) == ["availability", "buckets", "slots"]  # once each
    assert len(shared_warnings(caplog)) == 1


class Store:
    """A store that answers ``answer`` after ``seconds``."""

    def __init__(self, answer: str, seconds: float = 0.0) -> None:
        self.answer = answer
        self.seconds = seconds

    async def ask(self) -> str:
        await anyio.sleep(self.seconds)
        return self.answer


@pytest.mark.anyio
async def test_the_calls_deadline_bounds_a_wait_without_blaming_the_store() -> None:
    sink = ListSink()
    fallback = Fallback("availability", Store("shared", 30), Store("local"), telemetry=sink)
    fallback.timeout, fallback.recheck_seconds = 10.0, 0.0
    with anyio.fail_after(DEADLINE):
        assert await fallback.run(lambda s: s.ask(), anyio.current_time() + 0.05) == "local"
        assert not fallback.degraded and not sink.events  # the call ran out of time, not Redis
        fallback.timeout = 0.05
        assert await fallback.run(lambda s: s.ask(), math.inf) == "local"
        assert fallback.degraded and went_local(sink) == ["availability"]
        fallback.shared = Store("shared")  # it answers again
        assert await fallback.run(lambda s: s.ask()) == "shared"
    assert not fallback.degraded
    states = [e.state for e in sink.events if isinstance(e, SharedStateChanged)]
    assert states == ["local", "shared"]


class StrayCancel:
    """A shared store whose client raises a CancelledError of its own (a task it awaited,
    cancelled elsewhere): no one cancelled the call."""

    async def ask(self) -> str:
        import asyncio

        awaited = asyncio.ensure_future(asyncio.sleep(DEADLINE))
        await asyncio.sleep(0)
        awaited.cancel()
        await awaited
        raise AssertionError


@pytest.mark.anyio
@pytest.mark.backend_independent  # an asyncio CancelledError of the store's own
async def test_a_store_raising_a_cancelled_error_of_its_own_has_failed() -> None:
    """It ended the routed call with the CancelledError, as if the caller had cancelled it."""
    sink = ListSink()
    fallback = Fallback("availability", StrayCancel(), Store("local"), telemetry=sink)
    with anyio.fail_after(DEADLINE):
        assert await fallback.run(lambda s: s.ask()) == "local"
    assert fallback.degraded and went_local(sink) == ["availability"]
