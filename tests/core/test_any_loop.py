"""metis/core/any_loop.py: slots taken and given back from any event loop and thread, waiters
served in turn, each woken on its own loop; a cancelled wait takes none."""

from __future__ import annotations

import asyncio
import threading
import time

import anyio
import pytest
import trio

from metis.core.any_loop import AnyLoopSlots

GUARD_SECONDS = 30  # only ever reached when a waiter is never woken


@pytest.mark.anyio
async def test_waiters_are_served_in_the_order_they_came() -> None:
    slots = AnyLoopSlots(1)
    assert slots.take_nowait("first")
    served: list[str] = []

    async def wait(name: str, queued: anyio.Event) -> None:
        queued.set()
        await slots.take(name)
        served.append(name)
        slots.give_back(name)

    async with anyio.create_task_group() as group:
        for name in ("a", "b", "c"):
            queued = anyio.Event()
            group.start_soon(wait, name, queued)
            await queued.wait()
            await anyio.lowlevel.checkpoint()  # it is parked on the slots now
        slots.give_back("first")
    assert served == ["a", "b", "c"]
    assert slots.take_nowait("after")


@pytest.mark.anyio
async def test_a_cancelled_wait_takes_no_slot() -> None:
    slots = AnyLoopSlots(1)
    assert slots.take_nowait("holder")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await slots.take("cancelled")
    assert scope.cancelled_caught
    slots.give_back("holder")
    assert slots.take_nowait("next")  # the cancelled waiter neither holds it nor queues


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_waiter_on_another_threads_loop_is_woken_there(backend: str) -> None:
    slots = AnyLoopSlots(1)
    assert slots.take_nowait("main")
    held: list[bool] = []

    async def wait() -> None:
        await slots.take("thread")
        held.append(not slots.take_nowait("other"))

    run = (lambda: asyncio.run(wait())) if backend == "asyncio" else (lambda: trio.run(wait))
    waiter = threading.Thread(target=run, daemon=True)
    waiter.start()
    deadline = time.monotonic() + GUARD_SECONDS
    while not slots._waiters and time.monotonic() < deadline:  # parked on its own loop
        time.sleep(0.01)
    slots.give_back("main")  # from this thread, outside any loop
    waiter.join(GUARD_SECONDS)
    assert held == [True]
