"""Memory (issue 7, item 6): a very long stream and many cancelled streams retain nothing.

A MockTransport serves a generated Anthropic SSE body; tracemalloc compares what is still
allocated, after ``gc.collect()``, before and after. Growth must stay under a small fixed
tolerance and must not scale with the number of cancelled streams (200 vs 1,000).
"""

from __future__ import annotations

import gc
import json
import logging
import tracemalloc
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message, MessageComplete
from metis.pipeline.stores import InMemoryToolIdStore

pytestmark = pytest.mark.slow  # tracemalloc over 100k-event streams: tens of seconds

TOLERANCE = 256 * 1024  # bytes: caches warmed by the first calls, allocator noise
# A set or dict that grew during a burst keeps its larger table (asyncio's weak set of live
# async generators, trio's task set): one block, up to ~0.5 MiB after 1,000 streams. What
# would scale is blocks: a leak of a single object per stream adds 1,000 of them, where
# CPython's free lists (memory kept for reuse, still traced) account for ~100-300.
TABLE_TOLERANCE = 1024 * 1024
BLOCK_TOLERANCE = 500


def sse(obj: dict[str, object]) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


START = sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
) + sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
DELTA = sse(
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
)
END = (
    sse({"type": "content_block_stop", "index": 0})
    + sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 5},
        }
    )
    + sse({"type": "message_stop"})
)


class Body(httpx.AsyncByteStream):
    def __init__(self, deltas: int) -> None:
        self.deltas = deltas

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield START
        batch = DELTA * 100
        for _ in range(self.deltas // 100):
            yield batch
        yield DELTA * (self.deltas % 100)
        yield END


def make_adapter(deltas: int) -> Adapter:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Body(deltas)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return build_adapter(
        "anthropic",
        AdapterConfig(api_key="sk-test-0123456789abcdef", http_client=client),
        tool_id_store=InMemoryToolIdStore(),
    )


def make_request() -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("Write a lot.")],
        max_output_tokens=512,
    )


async def retained() -> int:
    """Traced memory once the garbage collector and the loop's finalizers have nothing left.

    A stream closed early leaves httpx's nested body generators (aiter_bytes -> aiter_raw ->
    the transport's stream) to the event loop's async-generator finalizer: each level is closed
    by its own finalizer task once the level above it is gone, so a batch of cancelled streams
    takes several loop turns to settle, more under trio (one system task per generator) and
    under tracemalloc's slowdown. A fixed number of turns once measured that backlog as if it
    were retained. Settle instead: collect and yield to the loop until traced memory stops
    falling for several rounds in a row.
    """
    last: int | None = None
    steady = 0
    for _ in range(500):
        gc.collect()
        await anyio.sleep(0.002)
        now: int = tracemalloc.get_traced_memory()[0]
        steady = steady + 1 if last is not None and now >= last else 0
        if steady >= 5:
            break
        last = now
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def retained_blocks() -> tuple[int, int]:
    """(bytes, blocks) still allocated once settled, as :func:`retained` settles."""
    size = await retained()
    blocks = sum(stat.count for stat in tracemalloc.take_snapshot().statistics("filename"))
    return size, blocks


async def cancelled_streams(adapter: Adapter, count: int) -> None:
    for _ in range(count):
        req = make_request()
        cancelled = False
        with anyio.fail_after(5):
            async for event in adapter.stream(req):
                if event.type == "text.delta" and not cancelled:
                    cancelled = adapter.cancel(req.request_id)
                    assert cancelled
                if isinstance(event, MessageComplete):
                    assert event.stop_reason.kind.value == "cancelled"


@pytest.mark.anyio
async def test_a_100k_delta_stream_retains_nothing() -> None:
    adapter = make_adapter(100_000)
    tracemalloc.start()
    try:
        with anyio.fail_after(60):
            async for _ in adapter.stream(make_request()):  # warm up
                break
            before = await retained()
            count = 0
            async for event in adapter.stream(make_request()):
                count += 1
                last = event
            del event
        assert isinstance(last, MessageComplete)
        assert count == 100_000 + 2
        del last
        growth = await retained() - before
    finally:
        tracemalloc.stop()
        await adapter.aclose()
    print(f"\n100,000-delta stream: retained growth {growth} bytes")
    assert growth < TOLERANCE


@pytest.mark.anyio
async def test_cancelled_streams_retain_nothing_and_do_not_scale() -> None:
    adapter = make_adapter(50)
    # pytest's log capture keeps every record (one usage warning per call): not metis's growth
    logging.getLogger("metis").disabled = True
    tracemalloc.start()
    try:
        await cancelled_streams(adapter, 20)  # warm up
        base = await retained_blocks()
        await cancelled_streams(adapter, 200)
        after_200 = await retained_blocks()
        await cancelled_streams(adapter, 1000)
        after_1000 = await retained_blocks()
    finally:
        tracemalloc.stop()
        logging.getLogger("metis").disabled = False
        await adapter.aclose()
    grew_200 = (after_200[0] - base[0], after_200[1] - base[1])
    grew_1000 = (after_1000[0] - after_200[0], after_1000[1] - after_200[1])
    print(
        f"\ncancelled streams: +{grew_200[0]} bytes in {grew_200[1]:+} blocks after 200, "
        f"+{grew_1000[0]} bytes in {grew_1000[1]:+} blocks after 1,000 more"
    )
    assert grew_200[1] < BLOCK_TOLERANCE
    assert grew_1000[1] < BLOCK_TOLERANCE
    assert grew_200[0] < TABLE_TOLERANCE
    assert grew_1000[0] < TABLE_TOLERANCE
    assert not adapter._inflight
