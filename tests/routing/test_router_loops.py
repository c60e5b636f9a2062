"""A Router (or an adapter built to init on its first call) made once and used from several
event loops: one ``asyncio.run`` after another, asyncio then trio, and threads each running
their own loop at once (a Router shared by a web server's worker threads). Every call is
answered; none waits on a lock or a slot of another loop (a hang) or fails with anyio's bare
RuntimeError from a primitive made under the other backend."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
import trio

from metis import build_adapter
from metis.model import CanonicalRequest, Message
from metis.routing import Limits, Router, RouteTarget
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"
GUARD_SECONDS = 60  # only ever reached when a call waits for good
THREADS = 8


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def _request(model: str = "route:default") -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=[Message.user("Hi")], max_output_tokens=64)


def _router(limited: bool) -> Router:
    limits = {"anthropic": Limits(max_concurrent=2)} if limited else None
    return Router([RouteTarget(MODEL, max_retries=0)], limits=limits)


def _in_threads(call: Callable[[], str]) -> list[str | BaseException]:
    """``call()`` in THREADS threads at once, each outcome (None: still waiting at the guard)."""
    outcomes: list[str | BaseException | None] = [None] * THREADS
    go = threading.Barrier(THREADS)

    def one(i: int) -> None:
        go.wait()
        try:
            outcomes[i] = call()
        except BaseException as error:
            outcomes[i] = error

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + GUARD_SECONDS
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert None not in outcomes, "a call waited for good"
    return [outcome for outcome in outcomes if outcome is not None]


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "max_concurrent"])
def test_a_router_serves_asyncio_then_trio(at_emulator: Emulator, limited: bool) -> None:
    """Before: under trio, anyio's bare RuntimeError('no running event loop') from the
    adapter's init lock (and the limiter's slots) made under asyncio."""
    router = _router(limited)
    for _ in range(2):
        assert asyncio.run(router.complete(_request())).text
    assert trio.run(router.complete, _request()).text
    assert asyncio.run(router.complete(_request())).text


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "max_concurrent"])
def test_a_router_shared_by_threads_each_on_its_own_loop(
    at_emulator: Emulator, limited: bool
) -> None:
    """Before: calls waited for good, parked on the init lock (or a limiter slot) of another
    thread's loop, whose release could not wake them."""
    router = _router(limited)
    outcomes = _in_threads(lambda: asyncio.run(router.complete(_request())).text)
    assert all(isinstance(outcome, str) and outcome for outcome in outcomes), outcomes
    outcomes = _in_threads(lambda: trio.run(router.complete, _request()).text)
    assert all(isinstance(outcome, str) and outcome for outcome in outcomes), outcomes


def test_an_adapter_that_inits_on_its_first_call_serves_every_loop(at_emulator: Emulator) -> None:
    adapter = build_adapter("anthropic", init_on_first_call=True)
    assert asyncio.run(adapter.init()) is None
    assert trio.run(adapter.init) is None  # once made, init is nothing on any loop
    outcomes = _in_threads(lambda: trio.run(adapter.complete, _request(MODEL)).text)
    assert all(isinstance(outcome, str) and outcome for outcome in outcomes), outcomes
