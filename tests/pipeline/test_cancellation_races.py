"""Cancellation races (issue 7, item 4), over real sockets to the emulator.

A call is cancelled at every point of its stream: before it is sent, while it waits for its
first byte, after each event index 0..N-1, and after it completed; from another task
(``adapter.cancel``), from the consuming task (``adapter.cancel``, and its own cancel scope);
each cancel is issued twice. Whatever the point, the events that arrived obey the invariants,
the iterator always terminates (under ``anyio.fail_after``), and no connection stays busy.

The emulator sends each event after a short delay (``x-emulator-fault: slow=...``), so a
cancel lands while the stream is really in flight.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from metis import AdapterConfig, AdapterError, build_adapter
from metis.adapter import Adapter
from metis.errors import CancelledError
from metis.model import CanonicalRequest, Message, MessageComplete, StreamEvent, ToolDefinition
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.testing.emulator import Emulator

from .. import pool_state

PROVIDERS = ["anthropic", "openai", "openai_responses", "gemini", "ollama"]
MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
}
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
SLOW = 0.01  # seconds before each event the emulator sends
DEADLINE = 10.0
MODES = ["other_task", "consumer_cancel", "consumer_scope"]


def make_adapter(provider: str, emulator: Emulator) -> Adapter:
    caps = {"supports_tools": True} if provider == "ollama" else {}
    settings = AdapterConfig(
        api_key="test-key",
        base_url=emulator.base_url(provider),
        capabilities=caps,
        extra_headers={"x-emulator-fault": f"slow={SLOW}"},
        timeout_seconds=30.0,
    )
    return build_adapter(provider, settings, tool_id_store=InMemoryToolIdStore())


def make_request(provider: str) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS[provider],
        session_id=f"races-{provider}",
        messages=[Message.user("What's the weather in Paris?")],
        tools=[WEATHER],
        max_output_tokens=512,
    )


def busy_connections(adapter: Adapter) -> int:
    return pool_state.busy_connections(adapter.http_client())


def check_events(events: list[StreamEvent], ended: bool) -> None:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    if ended:
        checker.check_ended()


async def run_one(adapter: Adapter, provider: str, mode: str, point: Any) -> dict[str, Any]:
    """One call cancelled at ``point``: "before_send", "connect", an event index, or "after"."""
    req = make_request(provider)
    events: list[StreamEvent] = []
    results: list[bool] = []
    error: BaseException | None = None
    reached = anyio.Event()  # the consumer got to the point
    resumed = anyio.Event()  # the other task has cancelled: go on

    async def cancel_twice() -> None:
        results.append(adapter.cancel(req.request_id))
        results.append(adapter.cancel(req.request_id))

    async def consume(scope_holder: list[anyio.CancelScope]) -> None:
        nonlocal error
        try:
            async with aclosing(adapter.stream(req)) as stream:
                async for event in stream:
                    events.append(event)
                    if point == len(events) - 1:
                        if mode == "other_task":
                            reached.set()
                            await resumed.wait()
                        elif mode == "consumer_cancel":
                            await cancel_twice()
                        else:
                            scope_holder[0].cancel()
                            scope_holder[0].cancel()
                            await anyio.lowlevel.checkpoint()
        except AdapterError as exc:
            error = exc

    with anyio.fail_after(DEADLINE):
        if mode == "consumer_scope":
            holder: list[anyio.CancelScope] = []
            with anyio.CancelScope() as scope:
                holder.append(scope)
                if point == "before_send":
                    scope.cancel()
                    scope.cancel()
                elif point == "connect":
                    scope.deadline = anyio.current_time() + SLOW / 3
                await consume(holder)
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume, [])
                if point == "before_send":
                    # the earliest moment the call is known: before anything is sent
                    while not adapter.cancel(req.request_id) and not events:
                        await anyio.lowlevel.checkpoint()
                    results.extend([True, adapter.cancel(req.request_id)])
                elif point == "connect":
                    await anyio.sleep(SLOW / 3)
                    await cancel_twice()
                elif mode == "other_task" and point != "after":
                    await reached.wait()
                    await cancel_twice()
                    resumed.set()
            if point == "after":
                await cancel_twice()
    await anyio.lowlevel.checkpoint()
    return {"events": events, "results": results, "error": error}


async def baseline_length(adapter: Adapter, provider: str) -> int:
    with anyio.fail_after(DEADLINE):
        events = [e async for e in adapter.stream(make_request(provider))]
    check_events(events, ended=True)
    return len(events)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancel_at_every_point(provider: str, mode: str, emulator: Emulator) -> None:
    adapter = make_adapter(provider, emulator)
    try:
        n = await baseline_length(adapter, provider)
        assert n >= 4
        points: list[Any] = ["before_send", "connect", *range(n), "after"]
        for point in points:
            outcome = await run_one(adapter, provider, mode, point)
            events: list[StreamEvent] = outcome["events"]
            results: list[bool] = outcome["results"]
            error = outcome["error"]
            where = f"{provider} {mode} at {point!r}: {[e.type for e in events]} {error!r}"
            # A cancel never surfaces as an exception from adapter.cancel() or the stream,
            # except CancelledError when nothing at all had arrived.
            assert error is None or isinstance(error, CancelledError), where
            if mode == "consumer_scope":
                check_events(events, ended=False)
                if isinstance(point, int) and point < n - 1:
                    assert len(events) == point + 1, where  # nothing after the cancel
            else:
                assert len(results) == 2, where
                assert results[1] is False, where  # a second cancel is a no-op
                if events:
                    check_events(events, ended=True)
                    final = events[-1]
                    assert isinstance(final, MessageComplete), where
                    if results[0] and (not isinstance(point, int) or point < n - 1):
                        assert final.stop_reason.kind is StopKind.CANCELLED, where
                else:
                    assert isinstance(error, CancelledError), where
                if point == "after":
                    assert results == [False, False], where
                    assert len(events) == n, where
            await settled(adapter, where)
    finally:
        await adapter.aclose()


async def settled(adapter: Adapter, where: str) -> None:
    """The call is forgotten and its connection back in the pool, within a moment.

    A cancel from another task returns before the consumer has seen the end of its stream,
    so this waits (bounded) for the consumer's side to finish closing.
    """
    with anyio.move_on_after(2.0):
        while adapter._inflight or busy_connections(adapter):  # noqa: ASYNC110
            await anyio.sleep(0.005)
    assert not adapter._inflight, f"{where}: still in flight: {list(adapter._inflight)}"
    assert not busy_connections(adapter), f"{where}: connections busy"


@pytest.mark.anyio
async def test_closing_a_stream_early_releases_its_connection_at_once(emulator: Emulator) -> None:
    adapter = make_adapter("anthropic", emulator)
    try:
        with anyio.fail_after(DEADLINE):
            async with aclosing(adapter.stream(make_request("anthropic"))) as stream:
                async for _ in stream:
                    break
            assert not adapter._inflight
            assert busy_connections(adapter) == 0
    finally:
        await settled(adapter, "after closing early")
        await adapter.aclose()
