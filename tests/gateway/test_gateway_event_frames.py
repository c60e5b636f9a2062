"""A translated stream's event passes few frames between the loop and the upstream: the joined
writer hands a waiting chunk's wait straight to the loop (no generator of its own between),
and the stream's bytes ask the call's events for the next with no wrapper round the ask.
Each frame there is paid at every event of every stream (issue 25 item 11). Driven by hand:
no loop, no server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from types import SimpleNamespace
from typing import Any

from metis.gateway.anthropic_write import MessageStream
from metis.gateway.begun import begun, next_of
from metis.gateway.joined_stream import Joined
from metis.gateway.metrics import Metrics
from metis.gateway.service import Gateway
from metis.model.content import Message
from metis.model.events import StreamEvent, TextDelta
from metis.model.request import CanonicalRequest
from tests.gateway.test_gateway_joined_stream import SCOPE, _never, _stream


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
        prepared = SimpleNamespace(
            started=time.monotonic(),
            inbound=SimpleNamespace(model="m"),
            request=CanonicalRequest(model="m", messages=[Message.user("hi")], max_output_tokens=8),
            target=SimpleNamespace(chat_model=None),  # (a stream with no end: charged an estimate)
        )
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


def _awaited(awaitable: Any) -> list[str]:
    """The names of the frames ``awaitable`` waits through, outermost first."""
    names = []
    while awaitable is not None:
        code = getattr(awaitable, "cr_code", None) or getattr(awaitable, "gi_code", None)
        names.append(code.co_qualname if code is not None else type(awaitable).__name__)
        awaitable = (
            getattr(awaitable, "cr_await", None)
            or getattr(awaitable, "gi_yieldfrom", None)
            or getattr(awaitable, "ag_await", None)
        )
    return names


def test_a_joined_stream_waits_through_no_frame_it_does_not_need() -> None:
    async def served() -> list[str]:
        arrived = asyncio.get_running_loop().create_future()

        async def body() -> AsyncGenerator[bytes, None]:
            yield b"a"
            await arrived
            yield b"b"

        other = body()
        taken = await begun(other)
        assert next_of(taken) == taken.__anext__  # its head not yet given
        assert await anext(taken) == b"a"
        assert next_of(taken) == other.__anext__  # then its body's own: no Begun frame
        await taken.aclose()  # type: ignore[union-attr]
        stream, _ = _stream(await begun(body()))
        serving = stream(SCOPE, _never, _kept)
        task = asyncio.ensure_future(serving)
        for _ in range(10):  # (loop turns until the stream waits for its next chunk)
            await asyncio.sleep(0)
        waits = _awaited(serving)
        arrived.set_result(None)
        await task
        return waits

    waits = asyncio.run(served())
    assert waits[:3] == ["JoinedStream.__call__", "RelayedStream._serve", "Joined.__await__"]


async def _kept(message: dict[str, Any]) -> None:
    pass
