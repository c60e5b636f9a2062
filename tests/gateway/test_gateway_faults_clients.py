"""Clients that misbehave, on the passed-through path (tests/gateway/test_gateway_app.py has
the translated one's): a client that goes away before the answer's headers or in the middle
of a stream (the upstream call is cancelled), one that stops reading (the gateway reads no
further ahead of it than its bound), and many streams in flight when the server shuts down
(each finishes)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.coalesce import MAX_READY
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, scope, serving

pytestmark = pytest.mark.anyio
BODY = {"model": "sonnet", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}
MESSAGE_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    b'"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
)
DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"more "}}\n\n'
)


@pytest.fixture
def emulator() -> Emulator:
    return Emulator()


def over(emulator: Emulator, handler: Any) -> Any:
    """The fixture's gateway with every upstream answered by ``handler``."""
    original = emulator.client
    transport = httpx.MockTransport(handler)
    emulator.client = lambda: httpx.AsyncClient(transport=transport)  # type: ignore[method-assign]
    try:
        return create_app(gateway_config(emulator))
    finally:
        emulator.client = original  # type: ignore[method-assign]


class Upstream:
    """A provider that sends a stream's first event and then, as ``endless`` says, a delta
    whenever asked (counting them) or nothing more; or that never answers a whole request.
    It records whether its answer was closed (the call cancelled)."""

    def __init__(self, endless: bool = False, silent: bool = False) -> None:
        self.endless, self.silent = endless, silent
        self.closed = False
        self.sent = 0
        self.asked = anyio.Event()

    async def _stream(self) -> AsyncIterator[bytes]:
        try:
            yield MESSAGE_START
            while self.endless:
                self.sent += 1
                yield DELTA
            await anyio.sleep_forever()
        finally:
            self.closed = True

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.set()
        if self.silent or not json.loads(request.content).get("stream"):
            try:
                await anyio.sleep_forever()
            finally:
                self.closed = True
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=self._stream())


async def hang_up(
    emulator: Emulator, streamed: bool, silent: bool = False
) -> tuple[Upstream, list[dict[str, Any]]]:
    """A client that goes away once its call is upstream (``streamed``: once the stream's
    first event reached it, unless the upstream is ``silent``: it never answers); the
    upstream, and what the gateway sent the client."""
    upstream = Upstream(silent=silent)
    app = over(emulator, upstream)
    requested: list[bool] = []
    got_body = anyio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not requested:
            requested.append(True)
            data = json.dumps({**BODY, "stream": streamed}).encode()
            return {"type": "http.request", "body": data, "more_body": False}
        await (got_body if streamed and not silent else upstream.asked).wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            got_body.set()

    with anyio.fail_after(60):  # a bound on a hang, not a timing: it ends at once when right
        await app(scope(), receive, send)
    return upstream, sent


async def test_a_client_that_goes_away_cancels_the_passed_through_call(
    emulator: Emulator,
) -> None:
    cases = (
        ("before the headers", False, False),
        ("a stream's, before its first event", True, True),
        ("mid-stream", True, False),
    )
    for case, streamed, silent in cases:
        upstream, sent = await hang_up(emulator, streamed, silent)
        assert upstream.asked.is_set() and upstream.closed, case
        if silent or not streamed:  # no one is there to read an answer: none is written
            assert all(m.get("status", 499) == 499 for m in sent), (case, sent)


async def test_a_client_that_stops_reading_holds_the_upstream_back(emulator: Emulator) -> None:
    """The gateway reads a bounded number of chunks ahead of a client that reads nothing:
    the upstream is read no further, so memory stays bounded however long the stream."""
    upstream = Upstream(endless=True)
    app = over(emulator, upstream)
    requested: list[bool] = []
    first = anyio.Event()

    async def receive() -> dict[str, Any]:
        if not requested:
            requested.append(True)
            data = json.dumps({**BODY, "stream": True}).encode()
            return {"type": "http.request", "body": data, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            first.set()
            await anyio.sleep_forever()  # a client that reads nothing more

    async with anyio.create_task_group() as group:
        group.start_soon(app, scope(), receive, send)
        with anyio.fail_after(60):  # a bound on a hang, not a timing
            await first.wait()
            await anyio.wait_all_tasks_blocked()
        read_ahead = upstream.sent
        group.cancel_scope.cancel()
    # what the upstream gave: the piece the client does not take (up to MAX_READY chunks
    # written together), MAX_READY more waiting behind it, and one chunk in each of the few
    # steps between the upstream and them (the relay, the deadline's stream)
    assert read_ahead <= 2 * MAX_READY + 8, read_ahead


@pytest.mark.slow
def test_shutdown_drains_many_passed_through_streams(emulator: Emulator) -> None:
    """Twenty streams in flight on a real server when it is told to stop: each finishes."""
    release = threading.Event()
    started = threading.Semaphore(0)

    async def finite(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            yield MESSAGE_START
            started.release()
            await anyio.to_thread.run_sync(release.wait)
            yield DELTA
            yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    app = over(emulator, finite)
    count = 20
    texts: list[str] = []
    with serving(app) as (url, server):

        def call() -> None:
            with httpx.stream(
                "POST",
                url + "/v1/messages",
                json={**BODY, "stream": True},
                headers={"x-api-key": GATEWAY_KEY},
                timeout=60,
            ) as reply:
                texts.append("".join(reply.iter_text()))

        clients = [threading.Thread(target=call) for _ in range(count)]
        for client in clients:
            client.start()
        for _ in range(count):
            assert started.acquire(timeout=60)
        server.should_exit = True  # as SIGTERM does: stop accepting, let the streams finish
        release.set()
        for client in clients:
            client.join(60)
    assert len(texts) == count
    assert all("message_stop" in text and "more " in text for text in texts), texts


async def send_half(emulator: Emulator, then: str) -> list[dict[str, Any]]:
    """A client that sends half its body, then goes away (``then="leave"``) or sends nothing
    more (``"stall"``); what the gateway sent it."""
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.05}))
    parts = [{"type": "http.request", "body": b'{"model": "sonnet", ', "more_body": True}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if parts:
            return parts.pop()
        if then == "stall":
            await anyio.sleep_forever()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(60):  # a bound on a hang, not a timing: it ends at once when right
        await app(scope(), receive, send)
    metrics = app.state.gateway.metrics.render()
    return [*sent, {"metrics": metrics}]


async def test_a_body_that_stops_coming_is_refused_in_the_callers_shape(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    for then, status, kind, counted in (
        ("leave", 499, "api_error", "cancelled"),
        ("stall", 408, "timeout_error", "invalid_request"),
    ):
        caplog.clear()
        *sent, metrics = await send_half(emulator, then)
        case = f"{then}: {sent}"
        assert sent[0]["status"] == status, case
        assert json.loads(sent[1]["body"])["error"]["type"] == kind, case
        assert f'error_class="{counted}"' in metrics["metrics"], case
        assert "gateway request failed" not in caplog.text, case  # not the gateway's own fault


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
def test_a_client_that_stops_reading_is_dropped_once_its_stream_is_past_its_deadline(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """On a real server, a client that stops reading without closing, its stream passed through
    (``/v1/messages``) or translated (Chat over the same Anthropic model). Before: past the
    deadline the gateway ended the upstream call but then waited, without end, to write the
    stream's error event to a client reading nothing, holding the request's task and its
    connection as long as the client held its socket. Now the error event is given up after
    endings.LAST_WORD_SECONDS and the connection dropped. The wait for the server to let go is
    bounded by the test's hang bound; nothing is timed."""
    monkeypatch.setattr("metis.gateway.endings.LAST_WORD_SECONDS", 0.2)
    upstream = Upstream(endless=True)
    original = emulator.client
    emulator.client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(upstream))  # type: ignore[method-assign]
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.5}))
    emulator.client = original  # type: ignore[method-assign]
    body = json.dumps({**BODY, "stream": True}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: gw\r\nx-api-key: {GATEWAY_KEY}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    with serving(app) as (url, server):
        host, port = url.removeprefix("http://").split(":")
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(60)  # a bound on a hang
            sock.connect((host, int(port)))
            sock.sendall(head + body)
            assert sock.recv(100).startswith(b"HTTP/1.1 200 OK")  # then nothing more read
            for _ in range(6000):  # a bound on a hang (60 s), not a timing
                if not server.server_state.connections and not server.server_state.tasks:
                    break
                threading.Event().wait(0.01)
            assert not server.server_state.connections and not server.server_state.tasks
            assert upstream.sent > 0
            answer = b""
            with contextlib.suppress(OSError):  # reset: the rest was dropped
                while piece := sock.recv(1 << 16):
                    answer += piece
    assert b"message_stop" not in answer and b"[DONE]" not in answer, answer[-300:]
