"""An HTTP/1.1 body is read by what arrived, not one HTTP chunk at a time
(metis/transport/held_reads.py): the chunks one socket read brought come as one piece, with
the same bytes, and the connection goes back to the pool as before. Over real loopback
sockets, with an httpx and an httpx2 client, under asyncio and trio."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from metis.errors import NetworkError
from metis.pipeline.request import ResponseHead, WireRequest
from metis.transport.stage import Transport

from ..fault_proxy import FaultProxy, chunk, chunked_head
from ..helpers import bound, make_call

pytestmark = pytest.mark.usefixtures("one_default_httpx2_tls_context")

EVENTS = [b'data: {"n": %d}\n\n' % n for n in range(12)]


@pytest.fixture(params=["httpx", "httpx2"])
def http(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(request.param)


async def body_reads(client: object, url: str) -> list[bytes]:
    """What the transport hands on after the head: the body's reads."""
    wire = WireRequest(url=f"{url}/v1/messages", body={}, headers={}, stream=True)
    items = [item async for item in bound(Transport(), http=client)(wire, make_call(), None)]  # type: ignore[arg-type]
    assert isinstance(items[0], ResponseHead)
    return items[1:]


@pytest.mark.anyio
async def test_the_chunks_of_one_socket_read_come_as_one_piece(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        whole = chunked_head() + b"".join(chunk(event) for event in EVENTS) + chunk(b"")
        proxy.script(whole)  # one write: one socket read holds every chunk
        proxy.script(whole)
        reads = await body_reads(client, proxy.url)
        again = await body_reads(client, proxy.url)
    assert reads == [b"".join(EVENTS)]  # one piece, not twelve
    assert again == reads
    assert [r.connection for r in proxy.requests] == [1, 1]  # its connection pooled again


@pytest.mark.anyio
async def test_chunks_that_arrive_apart_come_apart(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(chunked_head(), *(chunk(event) for event in EVENTS[:3]), chunk(b""))
        proxy.script(chunked_head() + chunk(EVENTS[0]) + chunk(b""))
        reads = await body_reads(client, proxy.url)
        again = await body_reads(client, proxy.url)
    assert b"".join(reads) == b"".join(EVENTS[:3])
    assert again == [EVENTS[0]]
    assert [r.connection for r in proxy.requests] == [1, 1]


@pytest.mark.anyio
async def test_a_broken_chunk_after_good_ones_fails_after_them(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        broken = chunked_head() + chunk(EVENTS[0]) + chunk(EVENTS[1]) + b"zz\r\nnot hex\r\n"
        proxy.script(broken)
        proxy.script(chunked_head() + chunk(EVENTS[2]) + chunk(b""))
        wire = WireRequest(url=f"{proxy.url}/v1/messages", body={}, headers={}, stream=True)
        items = bound(Transport(), http=client)(wire, make_call(), None)  # type: ignore[arg-type]
        read: list[object] = []
        with pytest.raises(NetworkError, match="illegal chunk header") as caught:
            async for item in items:
                read.append(item)
        assert isinstance(caught.value.__cause__, http.RemoteProtocolError)
        assert b"".join(read[1:]) == EVENTS[0] + EVENTS[1]  # what came before it, kept
        assert await body_reads(client, proxy.url) == [EVENTS[2]]
    assert [r.connection for r in proxy.requests] == [1, 2]  # the broken one was not reused
