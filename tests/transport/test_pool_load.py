"""The client metis makes, under load (metis/transport/slots.py, docs/http-client.md): its pool
serves hundreds of streams at once, a call past its size waits for a connection within the
call's deadline and cancel (never in httpcore's queue), and, in a slow test, 600 streams at a
3 s timeout each complete or end with the deadline's NetworkError, on time. Over loopback, with
a server of the test's own that answers once as many requests as asked for have arrived."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.errors import AdapterError, NetworkError
from metis.model import CanonicalRequest, Message, MessageComplete, StreamEvent
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.transport import slots as pool
from metis.transport.stage import Transport

from .test_deadlines import KEY, sse_reply

PIECES = sse_reply("fine")
REPLY = b"".join(PIECES)


@dataclass
class GatedServer:
    """Reads each request whole, then answers once ``gate`` is open (never, unless opened);
    counts the requests that arrived. With ``head_first``, the answer's head and first event
    go at once, the rest once the gate is open."""

    port: int = 0
    arrived: int = 0
    gate: anyio.Event = field(default_factory=anyio.Event)
    first_arrived: anyio.Event = field(default_factory=anyio.Event)
    open_at: int | None = None
    """Open the gate by itself once this many requests have arrived."""
    head_first: bool = False
    heads: int = 0
    two_heads: anyio.Event = field(default_factory=anyio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            gone = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)
            with contextlib.suppress(*gone):  # the client gave up (its deadline, a cancel)
                await self._answer(stream)

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            received += await stream.receive()
        head, _, body = received.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        while len(body) < length:
            body += await stream.receive()
        self.arrived += 1
        self.first_arrived.set()
        if self.open_at is not None and self.arrived >= self.open_at:
            self.gate.set()
        sent = 0
        if self.head_first:
            sent = 2
            await stream.send(b"".join(PIECES[:sent]))
            self.heads += 1
            if self.heads == 2:
                self.two_heads.set()
        await self.gate.wait()
        await stream.send(b"".join(PIECES[sent:]))


@asynccontextmanager
async def gated_server(
    open_at: int | None = None, head_first: bool = False
) -> AsyncIterator[GatedServer]:
    server = GatedServer(open_at=open_at, head_first=head_first)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", backlog=4096)
    server.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, server.handle)
        try:
            yield server
        finally:
            server.gate.set()
            tasks.cancel_scope.cancel()


def default_client_adapter(url: str, **config: Any) -> Adapter:
    """An adapter that makes its own client, as one built with no ``http_client`` does."""
    config.setdefault("max_retries", 0)
    settings = AdapterConfig(api_key=KEY, base_url=url, **config)
    return build_adapter("anthropic", settings, tool_id_store=InMemoryToolIdStore())


def ask() -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5", messages=[Message.user("hi")], max_output_tokens=64
    )


async def streamed(adapter: Adapter, request: CanonicalRequest | None = None) -> MessageComplete:
    events = [event async for event in adapter.stream(request or ask())]
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


@pytest.mark.anyio
async def test_the_default_pool_serves_more_streams_at_once_than_httpx_s_default() -> None:
    """httpx's own default pool (100 connections) would hold the 101st request back: here
    the server answers only once all 101 have arrived."""
    count = 101
    async with gated_server(open_at=count) as server:
        adapter = default_client_adapter(server.url, timeout_seconds=15)
        finals: list[MessageComplete] = []

        async def one() -> None:
            finals.append(await streamed(adapter))

        async with anyio.create_task_group() as tasks:
            for _ in range(count):
                tasks.start_soon(one)
        await adapter.aclose()
    assert server.arrived == count
    assert [final.stop_reason.kind for final in finals] == [StopKind.END_TURN] * count


@pytest.mark.anyio
async def test_a_call_past_the_pool_s_size_waits_for_a_connection_within_its_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait for a connection is bounded like the wait for the answer's head: here by the
    first-event timeout, while two streams hold the pool's two connections."""
    monkeypatch.setattr(pool, "MAX_CONNECTIONS", 2)
    async with gated_server(head_first=True) as server:
        adapter = default_client_adapter(server.url, timeout_seconds=60)
        finals: list[MessageComplete] = []
        failures: list[AdapterError] = []
        holders: list[AsyncIterator[StreamEvent]] = []
        holding = anyio.Event()

        async def hold() -> None:
            stream = adapter.stream(ask())
            await anext(stream)  # its first event: past its first-event clock
            holders.append(stream)
            if len(holders) == 2:
                holding.set()
            events = [event async for event in stream]
            assert isinstance(events[-1], MessageComplete)
            finals.append(events[-1])

        async def wait() -> None:
            with pytest.raises(NetworkError) as caught:
                await streamed(adapter)
            failures.append(caught.value)

        async with anyio.create_task_group() as tasks:
            for _ in range(2):
                tasks.start_soon(hold)
            await holding.wait()  # both streams are open, holding both connections
            # the calls after them have a short first-event clock: it bounds their wait
            adapter.pipeline.replace("transport", Transport(first_event_timeout=0.2))
            async with anyio.create_task_group() as waiting:
                for _ in range(2):
                    waiting.start_soon(wait)
            assert server.arrived == 2  # the others never got a connection, nor queued for one
            server.gate.set()
        await adapter.aclose()
    assert [f.message for f in failures] == ["anthropic: nothing arrived within 0.2 s"] * 2
    assert [final.stop_reason.kind for final in finals] == [StopKind.END_TURN] * 2


@pytest.mark.anyio
async def test_cancel_ends_a_call_waiting_for_a_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool, "MAX_CONNECTIONS", 1)
    async with gated_server() as server:
        adapter = default_client_adapter(server.url, timeout_seconds=30)
        first, waiting = ask(), ask()
        finals: dict[str, MessageComplete] = {}

        async def one(request: CanonicalRequest) -> None:
            finals[request.request_id] = await streamed(adapter, request)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(one, first)
            await server.first_arrived.wait()
            tasks.start_soon(one, waiting)
            await anyio.wait_all_tasks_blocked()
            assert adapter.cancel(waiting.request_id) is True
            await anyio.wait_all_tasks_blocked()
            assert waiting.request_id in finals  # over while the first still holds the slot
            server.gate.set()
        assert finals[waiting.request_id].stop_reason.kind is StopKind.CANCELLED
        assert finals[waiting.request_id].final_content == []
        assert finals[first.request_id].stop_reason.kind is StopKind.END_TURN
        assert server.arrived == 1
        # the one slot is free again: the next call gets it
        assert (await streamed(adapter)).stop_reason.kind is StopKind.END_TURN
        await adapter.aclose()


# The measurement -------------------------------------------------------------------------------

STREAMS = 600
TIMEOUT = 3.0
OVERRUN = 10.0
"""How long after its deadline a call may end: what a loaded 2-core machine needs to unwind
600 calls at once. Before the slots and the SDK-sized pool, the last call ended 45 s late."""


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("client", ["metis's own", "httpx2"])
@pytest.mark.usefixtures("one_default_httpx2_tls_context")
async def test_600_streams_at_a_3_s_timeout_complete_or_end_at_their_deadline(
    client: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with gated_server(open_at=1) as server:
        http: Any = None
        if client == "httpx2":
            httpx2 = pytest.importorskip("httpx2")
            limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
            http = httpx2.AsyncClient(limits=limits)
        adapter = default_client_adapter(server.url, timeout_seconds=TIMEOUT, http_client=http)
        outcomes: list[str] = []
        late: list[float] = []

        async def one() -> None:
            started = time.monotonic()
            try:
                final = await streamed(adapter)
                outcomes.append(final.stop_reason.kind.value)
            except NetworkError as error:
                assert f"the call's timeout ({TIMEOUT:g} s) ran out" in error.message
                outcomes.append("deadline")
            late.append(time.monotonic() - started - TIMEOUT)

        started = time.monotonic()
        async with anyio.create_task_group() as tasks:
            for _ in range(STREAMS):
                tasks.start_soon(one)
        wall = time.monotonic() - started
        await adapter.aclose()
        if http is not None:
            await http.aclose()
    with capsys.disabled():
        print(
            f"\n{client}: {outcomes.count('end_turn')} of {STREAMS} complete, "
            f"{outcomes.count('deadline')} at their deadline; the last call ended "
            f"{max(late):+.1f} s from its deadline; {wall:.1f} s in all"
        )
    # Every stream completes or ends at its deadline (a set's subset: all may complete).
    assert set(outcomes) <= {"deadline", "end_turn"} and len(outcomes) == STREAMS
    assert max(late) < OVERRUN
