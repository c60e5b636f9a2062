"""Cancellation (docs/contract.md §2) and timeouts, through real adapters.

Every scenario must end: each test runs under a hard deadline, so a hang fails it.
"""

from __future__ import annotations

import json

import anyio
import pytest

from metis.errors import NetworkError
from metis.model import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ToolUseEnd,
    ToolUseStart,
)
from metis.model.content import TextBlock, ToolUseBlock
from metis.model.response import StopKind
from metis.stages.policy.invariants import StreamChecker
from metis.transport.stage import Transport

from ..conftest import Waits
from ..fakes import (
    STALL,
    FakePeer,
    Reply,
    anthropic_end,
    anthropic_error,
    anthropic_reply,
    anthropic_start,
    anthropic_text,
    collect,
    request,
    sse,
)

DEADLINE = 5.0


def tool_stream_then_stall(texts: int = 200) -> Reply:
    """Text (``texts`` deltas), then a tool whose input is still arriving when the line goes
    quiet."""
    return Reply(
        chunks=[
            *sse(
                anthropic_start(),
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                *(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": f"t{i} "},
                    }
                    for i in range(texts)
                ),
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read_file",
                        "input": {},
                    },
                },
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": '{"path": "a.txt", "lim'},
                },
            ),
            STALL,
        ]
    )


def assert_cancelled_ending(
    events: list[StreamEvent], expect_tool: bool = True, tool_input: object = None
) -> MessageComplete:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.CANCELLED
    if expect_tool:
        end = events[-2]
        assert isinstance(end, ToolUseEnd) and end.tool_name == "read_file"
        expected = {"path": "a.txt"} if tool_input is None else tool_input
        assert end.final_input == expected  # what parses cleanly from the fragments
    return final


@pytest.mark.anyio
async def test_cancel_from_another_task_ends_the_stream_with_partial_content() -> None:
    peer = FakePeer(tool_stream_then_stall())
    adapter = peer.adapter("anthropic")
    req = request("anthropic")
    events: list[StreamEvent] = []
    results: list[bool] = []

    async def consume() -> None:
        async for event in adapter.stream(req):
            events.append(event)

    async def cancel_when_stalled() -> None:
        await peer.stalled.wait()
        results.append(adapter.cancel(req.request_id))
        results.append(adapter.cancel(req.request_id))  # idempotent: nothing left to do

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            tg.start_soon(cancel_when_stalled)
    final = assert_cancelled_ending(events)
    text, tool = final.final_content
    assert isinstance(text, TextBlock) and text.text == "".join(f"t{i} " for i in range(200))
    assert isinstance(tool, ToolUseBlock) and tool.input == {"path": "a.txt"}
    assert results == [True, False]
    assert peer.closed == 1  # the HTTP response was closed
    assert adapter.cancel(req.request_id) is False  # after completion


@pytest.mark.anyio
async def test_cancel_from_the_consuming_task_between_events() -> None:
    peer = FakePeer(tool_stream_then_stall())
    adapter = peer.adapter("anthropic")
    req = request("anthropic")
    events: list[StreamEvent] = []
    with anyio.fail_after(DEADLINE):
        async for event in adapter.stream(req):
            events.append(event)
            if isinstance(event, ToolUseStart):
                assert adapter.cancel(req.request_id) is True
    # The next read is refused, so the input fragment never arrives: nothing parses, {}.
    assert_cancelled_ending(events, tool_input={})


@pytest.mark.anyio
async def test_a_cancel_after_the_last_chunk_was_read_still_ends_the_call_cancelled() -> None:
    """The whole answer came in one chunk, read before the cancel (a short reply; a synchronous
    ``Session.stream`` reads ahead, so it was the usual case there): ``cancel()`` said True, so
    the call ends cancelled with what the caller saw, never ``end_turn``."""
    peer = FakePeer(
        Reply(
            chunks=[
                "".join(sse(anthropic_start(), *anthropic_text("hi", "there"), *anthropic_end()))
            ]
        )
    )
    adapter = peer.adapter("anthropic")
    req = request("anthropic")
    events: list[StreamEvent] = []
    answered: list[bool] = []
    with anyio.fail_after(DEADLINE):
        async for event in adapter.stream(req):
            events.append(event)
            if isinstance(event, MessageStart):
                answered.append(adapter.cancel(req.request_id))
    assert answered == [True]
    final = assert_cancelled_ending(events, expect_tool=False)
    assert final.final_content == [TextBlock(text="hithere")]  # what had arrived


@pytest.mark.anyio
async def test_cancel_before_the_call_starts_does_nothing() -> None:
    peer = FakePeer(anthropic_reply("hello"))
    adapter = peer.adapter("anthropic")
    req = request("anthropic")
    assert adapter.cancel(req.request_id) is False
    assert adapter.cancel("req_unknown") is False
    events = await collect(adapter, req)
    assert events[-1].stop_reason.kind is StopKind.END_TURN  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_cancel_while_connecting_gives_an_empty_cancelled_message() -> None:
    started = anyio.Event()

    async def slow_connect(request):  # type: ignore[no-untyped-def]
        started.set()
        await anyio.sleep_forever()

    peer = FakePeer()
    peer.handle = slow_connect  # type: ignore[method-assign]
    adapter = peer.adapter("anthropic")
    req = request("anthropic")
    events: list[StreamEvent] = []

    async def consume() -> None:
        events.extend(await collect(adapter, req))

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await started.wait()
            assert adapter.cancel(req.request_id) is True
    assert [type(e) for e in events] == [MessageStart, MessageComplete]
    assert_cancelled_ending(events, expect_tool=False)


@pytest.mark.anyio
async def test_cancel_during_a_retry_backoff_stops_waiting() -> None:
    peer = FakePeer(anthropic_error(529, "overloaded_error", "Overloaded", **{"retry-after": "30"}))
    adapter = peer.adapter("anthropic")
    req = request("anthropic")
    events: list[StreamEvent] = []

    async def consume() -> None:
        events.extend(await collect(adapter, req))

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.sleep(0.2)  # the first answer (529) arrived; the retry is sleeping
            assert len(peer.requests) == 1
            assert adapter.cancel(req.request_id) is True
    assert len(peer.requests) == 1
    assert_cancelled_ending(events, expect_tool=False)


@pytest.mark.anyio
async def test_cancelling_the_callers_task_closes_the_connection() -> None:
    peer = FakePeer(tool_stream_then_stall())
    adapter = peer.adapter("anthropic")
    received = 0
    with anyio.fail_after(DEADLINE):
        with anyio.CancelScope() as scope:
            async for event in adapter.stream(request("anthropic")):
                received += 1
                if isinstance(event, ToolUseStart):
                    scope.deadline = anyio.current_time() + 0.05  # the caller gives up
    assert scope.cancelled_caught
    assert received > 200
    assert peer.closed == 1


@pytest.mark.anyio
async def test_a_stalled_stream_ends_as_a_network_error_with_its_partial_content() -> None:
    peer = FakePeer(
        Reply(
            chunks=[
                *sse(
                    anthropic_start(),
                    *[
                        {
                            "type": "content_block_start",
                            "index": 0,
                            "content_block": {"type": "text", "text": ""},
                        },
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": "so far"},
                        },
                    ],
                ),
                STALL,
            ]
        )
    )
    adapter = peer.adapter("anthropic", max_retries=0)
    adapter.pipeline.replace("transport", Transport(idle_timeout=0.2))
    events: list[StreamEvent] = []
    with anyio.fail_after(DEADLINE), pytest.raises(NetworkError, match=r"stalled for 0\.2 s"):
        async for event in adapter.stream(request("anthropic")):
            events.append(event)
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["so far"]
    assert peer.closed == 1


@pytest.mark.anyio
async def test_no_first_event_in_time_is_a_network_error_and_is_retried(no_backoff: Waits) -> None:
    peer = FakePeer(Reply(chunks=[STALL]), anthropic_reply("second try"))
    adapter = peer.adapter("anthropic")
    adapter.pipeline.replace("transport", Transport(first_event_timeout=0.2))
    with anyio.fail_after(DEADLINE):
        events = await collect(adapter, request("anthropic"))
    assert len(peer.requests) == 2
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["second try"]


@pytest.mark.anyio
async def test_the_overall_timeout_bounds_a_non_streamed_call() -> None:
    peer = FakePeer(Reply(chunks=[STALL], headers={"content-type": "application/json"}))
    adapter = peer.adapter("anthropic", timeout_seconds=0.3, max_retries=0)
    with (
        anyio.fail_after(DEADLINE),
        pytest.raises(NetworkError, match=r"timeout \(0.3 s\) ran out"),
    ):
        await adapter.complete(request("anthropic", stream=False))


@pytest.mark.anyio
async def test_many_cancelled_streams_leave_nothing_in_flight() -> None:
    replies = [tool_stream_then_stall(texts=10) for _ in range(20)]
    peer = FakePeer(*replies)
    adapter = peer.adapter("anthropic")

    async def one() -> None:
        req = request("anthropic")
        async for event in adapter.stream(req):
            if isinstance(event, ToolUseStart):
                adapter.cancel(req.request_id)

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one)
    assert adapter._inflight == {}
    assert peer.closed == 20


def test_fixture_sanity() -> None:
    assert json.loads(sse({"type": "ping"})[0].split("data: ")[1]) == {"type": "ping"}
