"""OpenAI Responses over WebSocket fails as HTTP does (docs/websocket.md "Failures, as over
HTTP"), against the emulator on real sockets, under asyncio and trio: each provider error and
stream fault is the same metis error over the connection as over HTTP; an upgrade refused with
429 or 5xx is what the POST would get; the call's overall timeout ends a stalled reply; a cancel
interrupts a connection that never opens; a connection dropped before the first event is sent
again by ``retry`` on a new connection, whole. And Azure's WebSocket mode, end to end."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request

import metis
from metis.errors import (
    AdapterError,
    CancelledError,
    NetworkError,
    OverloadedError,
    RateLimitError,
    ServerError,
)
from metis.model import StopKind
from metis.sessions import Session
from metis.testing.emulator import Emulator
from metis.transport.websocket import WebSocket
from metis.transport.ws_stage import WebSocketTransport

from .test_websocket_mode import (
    MODEL,
    STACK,
    get_weather,
    session_on,
    transport_of,
    turns,
    ws_adapter,
)

FAULTS = [
    "rate_limit",
    "overloaded",
    "server_error",
    "auth",
    "context_overflow",
    "stream_error",
    "stream_error=rate_limit",
    "malformed;after=2",
    "drop=3",
]


async def failure_over_http(emulator: Emulator, fault: str) -> BaseException | None:
    """What a call without a session (over HTTP) meets under ``fault``."""
    adapter = ws_adapter(emulator)
    request = metis.CanonicalRequest(
        model=MODEL, messages=[metis.Message.user("Tell me a story")], max_output_tokens=200
    )
    emulator.push_fault(fault)
    async with adapter:
        try:
            async for _ in adapter.stream(request):
                pass
        except AdapterError as exc:
            return exc
    return None


async def failure_over_websocket(emulator: Emulator, fault: str) -> BaseException | None:
    adapter = ws_adapter(emulator)
    async with adapter, session_on(adapter) as session:
        await session.asend("Hello")  # the connection is open and holds a reply
        emulator.push_fault(fault)
        try:
            await session.asend("Tell me a story")
        except AdapterError as exc:
            return exc
    return None


@pytest.mark.anyio
@pytest.mark.parametrize("fault", FAULTS)
async def test_each_failure_is_the_same_error_over_the_connection_as_over_http(
    fault: str, emulator: Emulator
) -> None:
    over_http = await failure_over_http(emulator, fault)
    over_websocket = await failure_over_websocket(emulator, fault)
    assert [r.websocket != 0 for r in turns(emulator)] == [False, True, True]
    assert over_http is not None and over_websocket is not None
    assert type(over_websocket) is type(over_http)
    assert isinstance(over_websocket, AdapterError) and isinstance(over_http, AdapterError)
    assert over_websocket.provider_status == over_http.provider_status
    assert over_websocket.retry_after_seconds == over_http.retry_after_seconds


@asynccontextmanager
async def answering_upgrades_with(head: bytes, body: bytes) -> AsyncIterator[str]:
    """A loopback server answering every request with ``head`` and ``body``; its URL."""

    async def answer(client: anyio.abc.SocketStream) -> None:
        async with client:
            await client.receive()
            await client.send(head + b"content-length: %d\r\n\r\n" % len(body) + body)

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, answer)
            yield f"http://127.0.0.1:{port}/v1"
            group.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error"),
    [
        (b"429 Too Many Requests", RateLimitError),
        (b"500 Internal Server Error", ServerError),
        (b"503 Service Unavailable", ServerError),
        (b"529 Overloaded", OverloadedError),
    ],
)
async def test_an_upgrade_refused_with_429_or_5xx_is_what_the_post_would_get(
    status: bytes, error: type[AdapterError]
) -> None:
    body = json.dumps({"error": {"message": "try later", "type": "x", "code": None}}).encode()
    head = b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nretry-after: 7\r\n"
    request = metis.CanonicalRequest(
        model=MODEL, messages=[metis.Message.user("Hello")], max_output_tokens=100
    )
    async with answering_upgrades_with(head, body) as url:
        adapter = metis.build_adapter(STACK, api_key="k", base_url=url, max_retries=0)
        async with adapter, session_on(adapter) as session:
            with pytest.raises(error, match="try later") as over_websocket:
                await session.asend("Hello")
            with pytest.raises(error, match="try later") as over_http:
                await adapter.complete(request)
    for raised in (over_websocket.value, over_http.value):
        assert raised.provider_status == int(status[:3])
        assert raised.retry_after_seconds == over_http.value.retry_after_seconds


@pytest.mark.anyio
async def test_the_calls_overall_timeout_ends_a_reply_that_keeps_stalling(
    emulator: Emulator,
) -> None:
    adapter = metis.build_adapter(
        STACK, api_key="k", base_url=emulator.url, max_retries=0, timeout_seconds=0.5
    )
    async with adapter, session_on(adapter) as session:
        await session.asend("Hello")
        emulator.push_fault("stall=30;after=3")
        with pytest.raises(NetworkError, match=r"the call's timeout \(0\.5 s\) ran out"):
            await session.asend("Tell me a story")
        emulator.push_fault("stall=30;after=0")
        with pytest.raises(NetworkError, match=r"the call's timeout \(0\.5 s\) ran out"):
            await session.asend("Tell me another")


@pytest.mark.anyio
async def test_a_cancel_interrupts_a_connection_that_never_opens() -> None:
    async def accept_and_wait(stream: Any) -> None:
        async with stream:  # closed when the test ends the server (no unclosed socket left)
            await anyio.sleep_forever()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, accept_and_wait)
            adapter = metis.build_adapter(
                STACK, api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0
            )
            async with adapter, session_on(adapter) as session:
                outcome: list[Any] = []

                async def turn() -> None:
                    try:
                        outcome.append(await session.asend("Hello"))
                    except CancelledError as exc:
                        outcome.append(exc)

                async with anyio.create_task_group() as turns_group:
                    turns_group.start_soon(turn)
                    while not session.cancel():  # noqa: ASYNC110 (until the turn is in flight)
                        await anyio.sleep(0.01)
                assert len(outcome) == 1
                ended = outcome[0]
                assert isinstance(ended, CancelledError) or (
                    ended.stop_reason.kind is StopKind.CANCELLED
                )
                assert session.messages == [] or session.messages[-1].text == ""
            group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_kept_connection_dropped_before_the_first_event_is_replaced_without_a_retry(
    emulator: Emulator, no_backoff: list[float]
) -> None:
    adapter = metis.build_adapter(STACK, api_key="k", base_url=emulator.url, max_retries=0)
    async with adapter, session_on(adapter) as session:
        await session.asend("First")
        emulator.push_fault("drop=0")
        reply = await session.asend("Second")
        assert reply.text == "You said: Second"
    first, dropped, again = turns(emulator)
    assert first.websocket == dropped.websocket != again.websocket != 0
    assert dropped.json()["previous_response_id"] and len(dropped.json()["input"]) == 1
    assert "previous_response_id" not in again.json() and len(again.json()["input"]) == 3
    assert no_backoff == []


@pytest.mark.anyio
async def test_a_new_connection_dropped_before_the_first_event_is_sent_again_by_retry(
    emulator: Emulator, no_backoff: list[float]
) -> None:
    adapter = metis.build_adapter(STACK, api_key="k", base_url=emulator.url, max_retries=1)
    async with adapter, session_on(adapter) as session:
        emulator.push_fault("drop=0")
        reply = await session.asend("First")
        assert reply.text == "You said: First"
    dropped, again = turns(emulator)
    assert dropped.websocket != again.websocket != 0
    assert len(no_backoff) == 1


@pytest.mark.anyio
async def test_azure_responses_over_websocket_sends_only_the_new_items_on_one_connection(
    emulator: Emulator,
) -> None:
    stack = "azure_responses_ws"
    adapter = metis.build_adapter(
        stack, api_key="azure-key", base_url=emulator.base_url("azure_responses"), max_retries=0
    )
    model = f"{stack}:my-gpt-5-deployment"
    async with adapter, Session(model, adapters={stack: adapter}, tools=[get_weather]) as s:
        result = await s.arun("What's the weather in Paris?")
        assert result.reason == "complete" and result.steps == 2
        assert (await s.asend("Thanks")).text == "You said: Thanks"
    sent = turns(emulator)
    assert len(sent) == 3 and len({r.websocket for r in sent}) == 1 and sent[0].websocket
    assert all(r.path == "/azure/openai/v1/responses" for r in sent)
    assert [len(r.json()["input"]) for r in sent] == [1, 1, 1]
    assert all(r.headers.get("api-key") == "azure-key" for r in sent)


@asynccontextmanager
async def upgrading_then_never_reading() -> AsyncIterator[str]:
    """A loopback server that completes the WebSocket upgrade, then reads nothing more (its
    receive buffer fills, so a large message cannot be written); its URL."""

    async def accept(client: anyio.abc.SocketStream) -> None:
        protocol = WSConnection(ConnectionType.SERVER)
        async with client:
            while True:
                protocol.receive_data(await client.receive())
                if any(isinstance(event, Request) for event in protocol.events()):
                    break
            await client.send(protocol.send(AcceptConnection()))
            await anyio.sleep_forever()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        raw = listener.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # the accepted sockets' too
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, accept)
            yield f"http://127.0.0.1:{port}/v1"
            group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_turn_the_server_never_reads_ends_in_the_first_event_timeout() -> None:
    # More than the sockets' buffers hold (4 MB, 8 kB); one word, which the context check's
    # token estimate reads at once (a million words cost it seconds of CPU)
    long_text = "w" * 6_000_000
    async with upgrading_then_never_reading() as url:
        adapter = metis.build_adapter(
            STACK,
            api_key="k",
            base_url=url,
            max_retries=0,
            capabilities={"max_context_tokens": 10_000_000},
        )
        # The connection opens within it, and the 6 MB turn is prepared before: 2 s leaves
        # a loaded machine room for both (0.5 s once did not)
        transport = WebSocketTransport(first_event_timeout=2.0)
        adapter.pipeline.replace("websocket_transport", transport)
        async with adapter, session_on(adapter) as session:
            with anyio.move_on_after(30) as hang_guard:  # not a timing check: a hang fails
                with pytest.raises(NetworkError, match=r"nothing arrived within 2 s"):
                    await session.asend(long_text)
            assert not hang_guard.cancelled_caught
            assert not transport_of(adapter).holds(session.session_id)


class Unread(anyio.abc.ByteStream):
    """A connection whose peer reads nothing: each write begins, and never ends."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    async def send(self, item: bytes) -> None:
        self.writes.append(item)
        await anyio.sleep_forever()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.sleep_forever()
        raise AssertionError

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True


def opened(stream: anyio.abc.ByteStream) -> WebSocket:
    """A client connection on ``stream``, its upgrade done in memory."""
    client, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    server.receive_data(client.send(Request(host="example.com", target="/v1/responses")))
    assert any(isinstance(event, Request) for event in server.events())
    client.receive_data(server.send(AcceptConnection()))
    assert any(isinstance(event, AcceptConnection) for event in client.events())
    return WebSocket(stream, client, {}, opened_at=0.0)


@pytest.mark.anyio
async def test_a_message_cut_mid_write_is_followed_by_nothing_not_even_a_close_frame() -> None:
    stream = Unread()
    socket = opened(stream)
    with anyio.CancelScope() as scope:
        scope.cancel()  # the turn's clock ends while the message is being written
        await socket.send_text("word " * 1000)
    await socket.aclose()
    assert len(stream.writes) == 1 and stream.closed
    assert socket.closed  # and never used again
