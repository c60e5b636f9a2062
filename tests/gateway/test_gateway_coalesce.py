"""The gateway's streamed responses write together the chunks that are ready together
(metis/gateway/coalesce.py): one socket write for the events of one upstream read, and never a
chunk held back waiting for the next."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from metis.gateway.coalesce import MAX_READY, CoalescingStream

pytestmark = pytest.mark.anyio


async def _written(chunks: AsyncIterator[bytes]) -> list[bytes]:
    """The bodies the response sends, the closing empty one included."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await CoalescingStream(chunks).stream_response(send)
    assert sent[0]["type"] == "http.response.start"
    assert [m["more_body"] for m in sent[1:]] == [True] * (len(sent) - 2) + [False]
    return [m["body"] for m in sent[1:]]


async def test_chunks_ready_together_are_written_in_one_piece() -> None:
    async def ready() -> AsyncIterator[bytes]:
        for i in range(5):
            yield b"event %d\n" % i

    assert await _written(ready()) == [b"".join(b"event %d\n" % i for i in range(5)), b""]


async def test_a_chunk_is_written_before_the_next_is_ready() -> None:
    bodies: list[bytes] = []
    written = [anyio.Event() for _ in range(3)]

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            bodies.append(message["body"])
            written[len(bodies) - 1].set()

    async def slow() -> AsyncIterator[bytes]:
        for i in range(3):
            yield b"event %d\n" % i
            with anyio.fail_after(60):  # a bound on a hang: each is written while it waits
                await written[i].wait()

    await CoalescingStream(slow()).stream_response(send)
    assert bodies == [b"event 0\n", b"event 1\n", b"event 2\n"]


async def test_the_reader_waits_when_the_writer_is_behind() -> None:
    async def many() -> AsyncIterator[str]:
        for i in range(3 * MAX_READY):
            yield f"{i};"

    bodies = await _written(many())
    assert b"".join(bodies) == "".join(f"{i};" for i in range(3 * MAX_READY)).encode()
    assert len(bodies) >= 4  # three full batches at most MAX_READY each, then the end
    assert all(body.count(b";") <= MAX_READY for body in bodies)


async def test_the_bodys_error_is_raised_as_it_is() -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield b"one\n"
        raise LookupError("the stream broke")

    with pytest.raises(LookupError, match="the stream broke"):
        await _written(failing())


SCOPE_2_3 = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}


async def test_a_client_that_disconnects_stops_the_stream_with_nothing_more_sent() -> None:
    """Before ASGI 2.4 the disconnect is watched beside the reader: the body is closed (its
    upstream call with it) and nothing is sent after it."""
    sent: list[dict[str, Any]] = []
    first = anyio.Event()
    closed: list[bool] = []

    async def receive() -> dict[str, Any]:
        await first.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body"):
            first.set()

    async def endless() -> AsyncIterator[bytes]:
        try:
            yield b"event 0\n"
            await anyio.sleep_forever()
        finally:
            closed.append(True)

    with anyio.fail_after(60):  # a bound on a hang
        await CoalescingStream(endless())(SCOPE_2_3, receive, send)
    assert closed == [True]
    assert [m.get("body") for m in sent[1:]] == [b"event 0\n"]  # no closing empty body


async def test_a_whole_stream_stops_watching_for_the_disconnect() -> None:
    sent: list[dict[str, Any]] = []
    waiting = anyio.Event()

    async def receive() -> dict[str, Any]:
        waiting.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def ready() -> AsyncIterator[bytes]:
        await waiting.wait()
        yield b"event 0\n"

    with anyio.fail_after(60):  # a bound on a hang: the watch is cancelled, not awaited
        await CoalescingStream(ready())(SCOPE_2_3, receive, send)
    assert [(m.get("body"), m.get("more_body")) for m in sent[1:]] == [
        (b"event 0\n", True),
        (b"", False),
    ]


async def test_a_failing_body_raises_its_own_error_before_any_end_is_sent() -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def failing() -> AsyncIterator[bytes]:
        yield b"event 0\n"
        raise KeyError("a bug below")

    with pytest.raises(KeyError, match="a bug below"):
        await CoalescingStream(failing())(SCOPE_2_3, receive, send)
    assert all(m.get("more_body", True) for m in sent)  # no normal end before the error
