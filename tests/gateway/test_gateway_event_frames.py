"""A translated stream's event passes few frames between the loop and the upstream: the joined
writer hands a waiting chunk's wait straight to the loop (no generator of its own between),
and the stream's bytes ask the call's events for the next with no wrapper round the ask.
Each frame there is paid at every event of every stream (issue 25 item 11). Driven by hand:
no loop, no server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Generator
from types import SimpleNamespace
from typing import Any

from metis.gateway.anthropic_write import MessageStream
from metis.gateway.joined_stream import Joined
from metis.gateway.metrics import Metrics
from metis.gateway.service import Gateway
from metis.model.events import StreamEvent, TextDelta


class Wait:
    """An awaitable that yields itself once, as a future the loop would wait on."""

    def __await__(self) -> Generator[Any, Any, None]:
        yield self


async def _chunks(count: int, wait: Wait) -> AsyncIterator[bytes]:
    for i in range(count):
        await wait
        yield b"chunk %d;" % i


def test_a_waiting_chunk_is_yielded_to_the_loop_by_the_joined_writer_itself() -> None:
    wait, written = Wait(), []

    async def write(body: bytes) -> None:
        written.append(body)

    joined = Joined(_chunks(3, wait), write, b"first;").__await__()
    yielded = [joined.send(None)]
    assert joined.gi_yieldfrom is None  # (a generator of its own driving the wait before)
    assert written == [b"first;"]
    for _ in range(2):
        yielded.append(joined.send(None))
        assert joined.gi_yieldfrom is None
    try:
        joined.send(None)
    except StopIteration:
        pass
    else:
        raise AssertionError("the joined writer did not end with its chunks")
    assert yielded == [wait, wait, wait]
    assert written == [b"first;", b"chunk 0;", b"chunk 1;", b"chunk 2;"]


def test_the_streams_bytes_ask_the_calls_events_with_no_wrapper_round_the_ask() -> None:
    async def served() -> None:
        arrived = asyncio.get_running_loop().create_future()

        async def events() -> AsyncIterator[StreamEvent]:
            await arrived
            yield TextDelta(0, "b")

        gateway = Gateway.__new__(Gateway)
        gateway.metrics = Metrics()
        prepared = SimpleNamespace(started=time.monotonic(), inbound=SimpleNamespace(model="m"))
        writer = MessageStream("m", None, "msg_1")
        first = TextDelta(0, "a")
        chunks = gateway._chunks("anthropic", prepared, events(), first, writer, "")  # type: ignore[arg-type]
        assert b'"text":"a"' in await chunks.__anext__()
        asked = asyncio.ensure_future(chunks.__anext__())
        await asyncio.sleep(0)  # (one loop turn: the ask waits for the next event)
        assert type(chunks.ag_await).__name__ == "async_generator_asend"  # not anext()'s wrapper
        arrived.set_result(None)
        assert (await asked).endswith(b'"delta":{"type":"text_delta","text":"b"}}\n\n')
        assert [chunk async for chunk in chunks] == []

    asyncio.run(served())
