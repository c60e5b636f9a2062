"""``CancelHandle.guard()``: one wait that the call's cancel interrupts and its deadline
abandons (metis/pipeline/cancellation.py), under asyncio and trio."""

from __future__ import annotations

import math

import anyio
import anyio.lowlevel
import pytest

from metis.errors import CancelledError
from metis.pipeline.cancellation import CancelHandle


@pytest.mark.anyio
async def test_a_cancelled_handle_refuses_to_wait() -> None:
    handle = CancelHandle()
    handle.cancel()
    entered = False
    with pytest.raises(CancelledError), handle.guard():
        entered = True
    assert not entered


@pytest.mark.anyio
async def test_a_cancel_from_another_task_ends_the_wait_as_a_cancelled_error() -> None:
    handle = CancelHandle()
    after: list[str] = []

    async def cancel_soon() -> None:
        await anyio.sleep(0.01)
        assert handle.cancel()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_soon)
            with pytest.raises(CancelledError), handle.guard():
                await anyio.sleep(math.inf)
                after.append("woke")  # never: the scope ends the wait
    assert after == []
    assert handle._scope is None


@pytest.mark.anyio
async def test_a_passed_deadline_abandons_the_wait_quietly() -> None:
    handle = CancelHandle()
    with anyio.fail_after(10):
        with handle.guard(anyio.current_time() + 0.01) as scope:
            await anyio.sleep(math.inf)
    assert scope.cancelled_caught
    assert handle._scope is None


@pytest.mark.anyio
async def test_a_cancel_inside_the_wait_without_an_await_raises_at_its_end() -> None:
    handle = CancelHandle()
    with pytest.raises(CancelledError), handle.guard() as scope:
        assert handle._scope is scope
        handle.cancel()
    assert handle._scope is None


@pytest.mark.anyio
async def test_an_error_in_the_wait_is_raised_as_itself() -> None:
    handle = CancelHandle()
    with pytest.raises(KeyError, match="inside"), handle.guard(anyio.current_time() + 60):
        raise KeyError("inside")
    assert handle._scope is None
    with handle.guard() as scope:  # the handle guards the next wait as before
        await anyio.lowlevel.checkpoint()
    assert not scope.cancelled_caught


@pytest.mark.anyio
async def test_an_error_after_a_cancel_is_raised_as_itself() -> None:
    handle = CancelHandle()
    with pytest.raises(ValueError, match="inside"), handle.guard():
        handle.cancel()
        raise ValueError("inside")
