"""The read clock's time (metis/transport/exchange.py ``loop_clock``): anyio's, with the
running loop found once per exchange, not on every read; and a read's time left counted
from one reading of it."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from metis.transport.read_clock import ReadClock, loop_clock


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_the_clock_is_the_running_loops_own(anyio_backend: str) -> None:
    clock = loop_clock()
    if anyio_backend == "asyncio":
        assert clock == asyncio.get_running_loop().time
    else:
        assert clock is anyio.current_time
    before = anyio.current_time()
    assert before <= clock() <= anyio.current_time()


def test_a_reads_time_left_is_counted_from_one_reading_of_the_clock() -> None:
    times = iter([100.0, 200.0])
    clock = ReadClock(deadline=1000.0, idle=30.0, first_by=150.0, streamed=True)
    clock.now = lambda: next(times)
    assert clock.seconds_for_read() == 50.0  # nothing received: the first bytes' time, at 100
    clock.received = True
    assert clock.seconds_for_read() == 30.0  # each later read: the idle time, from 200
    clock.deadline = 210.0
    clock.now = lambda: 200.0
    assert clock.seconds_for_read() == 10.0  # never past the deadline
