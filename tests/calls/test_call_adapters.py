"""The adapters the one-line calls hold (metis/calls/adapters.py): a bounded LRU per event loop
that closes what it evicts once its calls end, closed with the loop that made them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import anyio
import pytest

import metis
from metis.adapter import Adapter
from metis.calls import adapters
from metis.model import MessageComplete
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


@pytest.fixture
def disposed(monkeypatch: pytest.MonkeyPatch) -> list[Adapter]:
    """The adapters closed during the test, in order."""
    seen: list[Adapter] = []
    aclose = Adapter.aclose

    async def recording(self: Adapter) -> None:
        seen.append(self)
        await aclose(self)

    monkeypatch.setattr(Adapter, "aclose", recording)
    return seen


@pytest.mark.anyio
async def test_the_least_recently_used_adapter_is_closed_beyond_the_bound(
    at_emulator: Emulator, disposed: list[Adapter], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapters, "MAX_ADAPTERS_PER_LOOP", 2)
    held = adapters.this_loop()
    await held.aclose()
    for tenant in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" comes
        await metis.acomplete(MODEL, "Hi", api_key=f"key-{tenant}")
    assert [a.config.api_key for a in disposed] == ["key-b"]
    assert sorted(a.config.api_key or "" for a in held.adapters()) == ["key-a", "key-c"]
    await held.aclose()
    assert len(held) == 0 and len(disposed) == 3


@pytest.mark.anyio
async def test_an_evicted_adapter_in_use_is_closed_when_its_call_ends(
    at_emulator: Emulator, disposed: list[Adapter], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapters, "MAX_ADAPTERS_PER_LOOP", 1)
    held = adapters.this_loop()
    await held.aclose()
    disposed.clear()
    events = metis.astream(MODEL, "Tell me a story.", api_key="key-a")
    first = await events.__anext__()  # the stream holds key-a's adapter
    await metis.acomplete(MODEL, "Hi", api_key="key-b")  # evicts key-a, still streaming
    assert disposed == []
    rest = [first] + [event async for event in events]
    assert isinstance(rest[-1], MessageComplete)
    assert [a.config.api_key for a in disposed] == ["key-a"]
    await held.aclose()


@pytest.mark.anyio
async def test_a_one_line_async_stream_left_in_async_with_ends_its_call_there(
    at_emulator: Emulator, disposed: list[Adapter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``async with metis.astream(...) as events:``, as a session's stream is used; it was
    'object does not support the asynchronous context manager protocol'."""
    monkeypatch.setattr(adapters, "MAX_ADAPTERS_PER_LOOP", 1)
    held = adapters.this_loop()
    await held.aclose()
    disposed.clear()
    async with metis.astream(MODEL, "Tell me a story.", api_key="key-a") as events:
        async for _ in events:
            await metis.acomplete(MODEL, "Hi", api_key="key-b")  # evicts key-a, in use
            break
        assert disposed == []
    assert [a.config.api_key for a in disposed] == ["key-a"]  # the call ended with the block
    assert [event async for event in events] == []
    await events.aclose()  # again: nothing
    await held.aclose()


def _job() -> Callable[[], Any]:
    async def job() -> None:
        await metis.acomplete(MODEL, "Hi")

    return job


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_loop_per_job_closes_its_adapters_when_it_ends(
    at_emulator: Emulator, disposed: list[Adapter], backend: str
) -> None:
    """``asyncio.run(metis.acomplete(...))`` per job: each job's adapter is closed with its
    loop and nothing of the loop is kept."""
    before = set(adapters._loops)
    for _ in range(3):
        anyio.run(_job(), backend=backend)
    assert len(disposed) == 3
    assert set(adapters._loops) == before


def test_a_loop_closed_without_ending_its_tasks_is_forgotten(at_emulator: Emulator) -> None:
    loop = asyncio.new_event_loop()
    loop.run_until_complete(metis.acomplete(MODEL, "Hi"))
    loop.close()  # its tasks never end; the adapter cannot be closed on it any more
    assert loop in adapters._loops
    asyncio.run(metis.acomplete(MODEL, "Hi"))  # the next call made on any loop drops it
    assert loop not in adapters._loops


# Measured over real sockets, in a process of their own (slow) -------------------------------

MEASURE = """
import gc, json, os, sys, tracemalloc
import anyio, metis
from metis.calls import adapters

MODEL = "anthropic:claude-sonnet-4-5"

async def job():
    await metis.acomplete(MODEL, "Hi")

def measured():
    gc.collect()
    return len(os.listdir("/proc/self/fd")), tracemalloc.get_traced_memory()[0]

def loop_per_job(backend):
    anyio.run(job, backend=backend)

def tenant(number):
    metis.complete(MODEL, "Hi", api_key=f"tenant-{number}")

work, arg = sys.argv[1], sys.argv[2]
run = loop_per_job if work == "loop_per_job" else tenant
for i in range(3):  # warm: imports, caches
    run(arg if work == "loop_per_job" else -i)
tracemalloc.start()
files, memory = measured()
for i in range(int(sys.argv[3])):
    run(arg if work == "loop_per_job" else i)
more_files, more_memory = measured()
print(json.dumps({"files": more_files - files, "bytes": more_memory - memory,
                  "max": adapters.MAX_ADAPTERS_PER_LOOP}))
"""


def _measure(emulator: Emulator, work: str, arg: str, times: int) -> dict[str, int]:
    env = {**os.environ, "ANTHROPIC_BASE_URL": emulator.url, "ANTHROPIC_API_KEY": "test-key"}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, work, arg, str(times)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, int] = json.loads(done.stdout)
    return result


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_loop_per_job_leaks_no_files_and_no_memory(emulator: Emulator, backend: str) -> None:
    """Before: every ``asyncio.run(metis.acomplete(...))`` kept its adapter, its pool's
    socket and its dead loop (measured over plain HTTP, 60 jobs: asyncio +60 files and +2.3
    MB, trio +5 files; now 0 files and about 15 kB)."""
    grown = _measure(emulator, "loop_per_job", backend, 60)
    assert grown["files"] <= 2
    assert grown["bytes"] < 512 << 10


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_many_keys_through_the_sync_forms_keep_a_bounded_number_of_pools(
    emulator: Emulator,
) -> None:
    """Before: one adapter and pool per distinct key, forever (64 keys: +63 files; now 13)."""
    grown = _measure(emulator, "tenant", "", 64)
    assert grown["files"] <= grown["max"] + 2
