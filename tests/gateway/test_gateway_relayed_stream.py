"""A passed-through stream is served in the request's own task (metis/gateway/relayed_stream.py):
each chunk written as it is read, the client's disconnect and the deadline end it, the body
is closed however it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from metis.errors import AdapterError
from metis.gateway.errors import TimeLimit
from metis.gateway.metrics import Metrics
from metis.gateway.relayed_stream import RelayedStream
from metis.gateway.service import StreamResult

pytestmark = pytest.mark.anyio
LATE_SAID = b"took longer than the gateway allows: 0.05 s (gateway.request_timeout_seconds)"
SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}


def _stream(chunks: AsyncIterator[bytes], seconds: float = 60, ended: bool = False) -> Any:
    def failed(error: AdapterError) -> bytes:
        return b"event: error\ndata: " + error.message.encode() + b"\n\n"

    result = StreamResult(
        chunks,
        {"Content-Type": "text/event-stream", "x-metis-path": "pass-through"},
        anyio.current_time() + seconds,
        TimeLimit(seconds),
        failed,
        lambda: ended,
    )
    metrics = Metrics()
    return RelayedStream(result, metrics, "anthropic"), metrics


async def _never() -> dict[str, Any]:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def _served(stream: RelayedStream, receive: Any = _never) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(60):  # a bound on a hang, not a timing
        await stream(SCOPE, receive, send)
    return sent


async def test_each_chunk_is_written_as_it_is_read_then_the_end() -> None:
    async def three() -> AsyncIterator[bytes]:
        for i in range(3):
            yield b"event %d\n\n" % i

    stream, _ = _stream(three())
    stream.headers["request-id"] = "req_1"
    sent = await _served(stream)
    assert sent[0] == {
        "type": "http.response.start",
        "status": 200,
        "headers": [
            (b"content-type", b"text/event-stream"),
            (b"x-metis-path", b"pass-through"),
            (b"request-id", b"req_1"),
        ],
    }
    assert [(m["body"], m["more_body"]) for m in sent[1:]] == [
        (b"event 0\n\n", True),
        (b"event 1\n\n", True),
        (b"event 2\n\n", True),
        (b"", False),
    ]


async def test_a_client_that_disconnects_ends_the_stream_and_closes_its_body() -> None:
    first = anyio.Event()
    closed: list[bool] = []

    async def receive() -> dict[str, Any]:
        await first.wait()
        return {"type": "http.disconnect"}

    async def endless() -> AsyncIterator[bytes]:
        try:
            yield b"event 0\n\n"
            first.set()
            await anyio.sleep_forever()
        finally:
            closed.append(True)

    stream, metrics = _stream(endless())
    sent = await _served(stream, receive)
    assert closed == [True]
    assert [m.get("body") for m in sent[1:]] == [b"event 0\n\n"]  # nothing after: no end
    assert not metrics.errors  # a client gone is no error of the stream's


async def test_a_stream_past_its_deadline_ends_with_the_apis_error_event() -> None:
    closed: list[bool] = []

    async def stalled() -> AsyncIterator[bytes]:
        try:
            yield b"event 0\n\n"
            await anyio.sleep_forever()
        finally:
            closed.append(True)

    stream, metrics = _stream(stalled(), seconds=0.05)
    sent = await _served(stream)
    assert closed == [True]
    last = sent[-1]
    assert last["more_body"] is False
    assert last["body"].startswith(b"event: error") and LATE_SAID in last["body"]
    assert metrics.errors == {("anthropic", "POST /v1/messages", "server_error"): 1}


async def test_a_body_that_fails_after_the_start_ends_with_an_error_event() -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield b"event 0\n\n"
        raise LookupError("a bug")

    stream, metrics = _stream(failing())
    sent = await _served(stream)
    assert metrics.errors == {("anthropic", "POST /v1/messages", "other"): 1}
    assert sent[1]["body"] == b"event 0\n\n"
    assert sent[-1]["more_body"] is False and b"internal gateway error" in sent[-1]["body"]


async def test_a_stream_that_said_its_own_end_is_not_counted_again() -> None:
    async def stalled() -> AsyncIterator[bytes]:
        yield b"event 0\n\n"
        await anyio.sleep_forever()

    stream, metrics = _stream(stalled(), seconds=0.05, ended=True)
    sent = await _served(stream)
    assert LATE_SAID in sent[-1]["body"]
    assert not metrics.errors


async def test_a_body_whose_head_cannot_be_sent_still_runs_its_ending() -> None:
    """ASGI 2.4: the server's send raises OSError once the client is gone, here at the
    head; the body was begun first, so its ending (the key's place, the upstream) runs."""
    ended: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"event 0\n\n"
        finally:
            ended.append(True)

    async def send(message: dict[str, Any]) -> None:
        raise OSError("the client went away")

    stream, metrics = _stream(body())
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    with anyio.fail_after(60):  # a bound on a hang
        await stream(scope, _never, send)
    assert ended == [True]
    assert not metrics.errors


async def test_a_stream_past_its_deadline_before_its_first_chunk_still_answers() -> None:
    """The deadline comes while the first chunk is awaited, before the head went out: the
    client gets the head and the API's error event (not an IndexError and a cut)."""
    closed: list[bool] = []

    async def silent() -> AsyncIterator[bytes]:
        try:
            await anyio.sleep_forever()
            yield b"never"
        finally:
            closed.append(True)

    stream, metrics = _stream(silent(), seconds=0.05)
    sent = await _served(stream)
    assert closed == [True]
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert sent[-1]["more_body"] is False and LATE_SAID in sent[-1]["body"]
    assert metrics.errors == {("anthropic", "POST /v1/messages", "server_error"): 1}
