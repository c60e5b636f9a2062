"""A translated stream is served in the request's own task (metis/gateway/joined_stream.py):
the chunks that come without waiting are written in one piece, each before the next wait;
the client's disconnect, the deadline, a failure and a failed write end it, and its body's
ending runs however it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from metis.errors import AdapterError
from metis.gateway.errors import TimeLimit
from metis.gateway.joined_stream import MAX_READY, JoinedStream
from metis.gateway.metrics import Metrics
from metis.gateway.service import StreamResult

pytestmark = pytest.mark.anyio
LATE_SAID = b"took longer than the gateway allows: 0.05 s (gateway.request_timeout_seconds)"
SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}


def _stream(chunks: AsyncIterator[bytes], seconds: float = 60) -> tuple[JoinedStream, Metrics]:
    def failed(error: AdapterError) -> bytes:
        return b"event: error\ndata: " + error.message.encode() + b"\n\n"

    result = StreamResult(
        chunks,
        {"Content-Type": "text/event-stream", "x-metis-path": "translated"},
        anyio.current_time() + seconds,
        TimeLimit(seconds),
        failed,
    )
    metrics = Metrics()
    return JoinedStream(result, metrics, "anthropic"), metrics


async def _never() -> dict[str, Any]:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def _served(stream: JoinedStream, receive: Any = _never, send: Any = None) -> list[Any]:
    sent: list[dict[str, Any]] = []

    async def kept(message: dict[str, Any]) -> None:
        sent.append(message)
        if send is not None:
            await send(message)

    with anyio.fail_after(60):  # a bound on a hang, not a timing
        await stream(SCOPE, receive, kept)
    assert sent[0] == {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/event-stream"), (b"x-metis-path", b"translated")],
    }
    return [m["body"] for m in sent[1:]]


def _events(*numbers: int) -> bytes:
    return b"".join(b"event %d\n\n" % i for i in numbers)


async def test_chunks_ready_together_are_written_in_one_piece() -> None:
    async def ready() -> AsyncIterator[bytes]:
        for i in range(5):
            yield _events(i)

    stream, _ = _stream(ready())
    assert await _served(stream) == [_events(0, 1, 2, 3, 4), b""]


async def test_what_is_ready_is_written_before_each_wait() -> None:
    """Two reads of two events each: each read's pair is written before the next is waited
    for, in one piece."""
    written = anyio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message.get("body"):
            written.set()

    async def two_reads() -> AsyncIterator[bytes]:
        yield _events(0)
        yield _events(1)
        await written.wait()  # the second read comes once the first is written
        yield _events(2)
        yield _events(3)

    stream, _ = _stream(two_reads())
    assert await _served(stream, send=send) == [_events(0, 1), _events(2, 3), b""]


async def test_a_stream_always_ready_is_written_every_max_ready_chunks() -> None:
    async def many() -> AsyncIterator[bytes]:
        for _ in range(MAX_READY + 1):
            yield b"x"

    stream, _ = _stream(many())
    assert await _served(stream) == [b"x" * MAX_READY, b"x", b""]


async def test_a_client_that_disconnects_ends_the_stream_and_closes_its_body() -> None:
    first = anyio.Event()
    closed: list[bool] = []

    async def receive() -> dict[str, Any]:
        await first.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message.get("body"):
            first.set()

    async def endless() -> AsyncIterator[bytes]:
        try:
            yield _events(0)
            await anyio.sleep_forever()
        finally:
            closed.append(True)

    stream, metrics = _stream(endless())
    assert await _served(stream, receive, send) == [_events(0)]  # nothing after: no end
    assert closed == [True]
    assert not metrics.errors


async def test_a_stream_past_its_deadline_ends_with_the_apis_error_event() -> None:
    closed: list[bool] = []

    async def stalled() -> AsyncIterator[bytes]:
        try:
            yield _events(0)
            await anyio.sleep_forever()
        finally:
            closed.append(True)

    stream, metrics = _stream(stalled(), seconds=0.05)
    bodies = await _served(stream)
    assert closed == [True]
    assert bodies[0] == _events(0)
    assert bodies[-1].startswith(b"event: error") and LATE_SAID in bodies[-1]
    assert metrics.errors == {("anthropic", "POST /v1/messages", "server_error"): 1}


async def test_what_came_before_a_failure_is_written_then_the_error_event() -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield _events(0)
        yield _events(1)
        raise LookupError("a bug")

    stream, metrics = _stream(failing())
    bodies = await _served(stream)
    assert bodies[0] == _events(0, 1)
    assert b"internal gateway error" in bodies[-1]
    assert metrics.errors == {("anthropic", "POST /v1/messages", "other"): 1}


async def test_a_write_that_fails_while_a_read_waits_ends_that_read_and_the_body() -> None:
    """ASGI 2.4: the server's send raises OSError once the client is gone. It fails as the
    gathered events go out, while the next read waits: that read is cancelled and the
    body's ending (the key's place, the upstream call) runs."""
    ended: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield _events(0)
            yield _events(1)
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                ended.append("read cancelled")
                raise
        finally:
            ended.append("ended")

    async def send(message: dict[str, Any]) -> None:
        if message.get("body"):
            raise OSError("the client went away")

    stream, metrics = _stream(body())
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    with anyio.fail_after(60):  # a bound on a hang
        await stream(scope, _never, send)
    assert ended == ["read cancelled", "ended"]
    assert not metrics.errors


async def test_a_deadline_during_a_write_while_a_read_waits_in_a_cancel_scope() -> None:
    """The write hangs (a slow client) while the next read waits inside a cancel scope of
    its own; the deadline cancels the write, then that read (its scope left in order), then
    the stream ends with the error event."""
    ended: list[str] = []
    hung: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield _events(0)
            yield _events(1)
            with anyio.CancelScope():
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    ended.append("read cancelled")
                    raise
        finally:
            ended.append("ended")

    async def send(message: dict[str, Any]) -> None:
        if message.get("body") and not hung:
            hung.append(True)
            await anyio.sleep_forever()

    stream, metrics = _stream(body(), seconds=0.05)
    bodies = await _served(stream, send=send)
    assert ended == ["read cancelled", "ended"]
    assert bodies[0] == _events(0, 1)
    assert bodies[-1].startswith(b"event: error") and LATE_SAID in bodies[-1]
    assert metrics.errors == {("anthropic", "POST /v1/messages", "server_error"): 1}
