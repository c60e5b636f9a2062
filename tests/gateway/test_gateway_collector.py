"""A served gateway's cyclic collector (metis/gateway/collector.py): its automatic passes are
off while ``metis serve`` serves, and the same passes run once no model call waits for its
answer; past ten times the threshold, in front of a call; never in a gateway a program made
for itself."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app, frozen_for_serving
from metis.gateway.collector import CEILING, Collector
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


class Counted:
    """The collector's counts, as the test sets them, and the passes asked for."""

    def __init__(self) -> None:
        self.counts = (0, 0, 0)
        self.passes: list[int] = []

    def collector(self) -> Collector:
        collector = Collector(lambda: self.counts, self.passes.append)
        collector.thresholds = (700, 10, 10)
        collector._young = 700
        collector.active = True  # as serving() leaves it, without touching this process's gc
        return collector


async def test_a_due_pass_waits_until_no_model_call_waits_for_its_answer() -> None:
    counted = Counted()
    collector = counted.collector()
    collector.arrived()
    collector.arrived()
    counted.counts = (700, 0, 0)
    collector.answered()  # another call still waits
    await asyncio.sleep(0)
    assert counted.passes == []
    collector.arrived()  # a third arrives: below the ceiling, no pass in front of it
    assert counted.passes == []
    collector.answered()
    collector.answered()  # none waits now: the pass runs once this step is over
    assert counted.passes == []
    await asyncio.sleep(0)
    assert counted.passes == [0]
    assert collector.waiting == 0


async def test_a_call_arriving_before_the_pass_runs_puts_it_off() -> None:
    counted = Counted()
    collector = counted.collector()
    counted.counts = (900, 0, 0)
    collector.arrived()
    collector.answered()
    collector.arrived()  # in the same step, before the scheduled pass
    await asyncio.sleep(0)
    assert counted.passes == []
    collector.answered()
    await asyncio.sleep(0)
    assert counted.passes == [0]


@pytest.mark.parametrize(
    ("counts", "generation"),
    [((700, 0, 0), 0), ((700, 10, 10), 0), ((700, 11, 0), 1), ((700, 11, 11), 2)],
)
def test_the_pass_is_the_oldest_generation_over_its_threshold(
    counts: tuple[int, int, int], generation: int
) -> None:
    counted = Counted()
    counted.counts = counts
    counted.collector().collect()
    assert counted.passes == [generation]


def test_no_pass_below_the_first_threshold() -> None:
    counted = Counted()
    counted.counts = (699, 50, 50)
    counted.collector().collect()
    assert counted.passes == []


def test_past_the_ceiling_a_pass_runs_in_front_of_an_arriving_call() -> None:
    counted = Counted()
    collector = counted.collector()
    collector.arrived()  # calls that keep overlapping: none is ever without another
    counted.counts = (700 * CEILING - 1, 0, 0)
    collector.arrived()
    assert counted.passes == []
    counted.counts = (700 * CEILING, 0, 0)
    collector.arrived()
    assert counted.passes == [0]
    assert collector.waiting == 3


def test_another_request_runs_a_due_pass_unless_a_model_call_waits() -> None:
    counted = Counted()
    collector = counted.collector()
    counted.counts = (700, 0, 0)
    collector.arrived()
    collector.aside()  # a health check while a model call waits: not now
    assert counted.passes == []
    collector.waiting = 0
    collector.aside()
    assert counted.passes == [0]


async def test_a_collector_not_serving_runs_no_pass() -> None:
    counted = Counted()
    collector = counted.collector()
    collector.active = False
    counted.counts = (700 * CEILING, 11, 11)
    collector.arrived()
    collector.answered()
    collector.aside()
    await asyncio.sleep(0)
    assert counted.passes == []


def test_serving_turns_the_automatic_passes_off_and_stopped_on_again() -> None:
    assert gc.isenabled()
    collector = Collector()
    try:
        collector.serving()
        assert not gc.isenabled()
        assert collector.active
        assert collector.thresholds == gc.get_threshold()
    finally:
        collector.stopped()
    assert gc.isenabled()
    assert not collector.active


def test_a_process_whose_collector_was_off_is_left_as_it_was() -> None:
    gc.disable()
    try:
        collector = Collector()
        collector.serving()
        assert not collector.active
        collector.stopped()
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_a_served_gateway_collects_between_its_answers_and_not_after_its_lifespan() -> None:
    """``metis serve``'s application: the automatic passes off while it serves, a pass due
    when a model call is answered run after it, the automatic passes on again at its end."""
    passes: list[int] = []

    def counted(app: Any) -> Any:
        collector = app.collector
        collector._counts = lambda: (collector._young, 0, 0)  # a pass due, always
        collector._collect = passes.append
        return app

    plain = counted(create_app(gateway_config(Emulator())))
    async with plain.router.lifespan_context(plain):
        assert gc.isenabled()
        await _asked(plain)
    assert passes == []  # a program's own gateway leaves its process's collector alone
    app = frozen_for_serving(counted(create_app(gateway_config(Emulator()))))
    async with app.router.lifespan_context(app):
        assert not gc.isenabled()
        await _asked(app)
        await asyncio.sleep(0)
        assert passes and set(passes) == {0}
        passes.clear()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            assert (await client.get("/health")).status_code == 200
        assert passes == [0]  # asked nothing but a health check, it still collects
        assert app.collector.waiting == 0  # type: ignore[attr-defined]
    assert gc.isenabled()


async def _asked(app: Any) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        reply = await client.post("/v1/messages", json=SAID, headers={"x-api-key": GATEWAY_KEY})
        assert reply.status_code == 200, reply.text


async def test_the_timer_collects_while_streams_go_on_and_no_request_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("metis.gateway.collector.TICK_SECONDS", 0.01)
    counted = Counted()
    collector = counted.collector()
    counted.counts = (700, 0, 0)
    collector.ticked()  # what serving() starts
    assert counted.passes == [0]
    await asyncio.sleep(0.05)
    assert len(counted.passes) > 1  # it checks again, with no call arriving or answered
    collector.stopped()
    ran = len(counted.passes)
    await asyncio.sleep(0.05)
    assert len(counted.passes) == ran  # stopped: no timer left behind


async def test_the_timer_leaves_a_waiting_call_alone_below_the_ceiling() -> None:
    counted = Counted()
    collector = counted.collector()
    collector.arrived()
    counted.counts = (700 * CEILING - 1, 0, 0)
    collector.ticked()
    assert counted.passes == []
    counted.counts = (700 * CEILING, 0, 0)
    collector.ticked()
    assert counted.passes == [0]
    collector.stopped()
