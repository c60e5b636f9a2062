"""A response's first reads before other responses' later ones (the gateway's upstream pools:
metis/gateway/upstream_pool.py; metis/transport/http1_protocol.py): when bytes for a stream
already begun and a response's head arrive in the same loop turn, the response's reader
resumes first, so a stream's first bytes do not queue behind the other streams' next events;
a library's pools keep the arrival order."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from metis.gateway.upstream_pool import upstream_client
from metis.transport.http1 import LeanTransport
from metis.transport.http1_protocol import FirstReads, Http1Connection

from ..fault_proxy import FaultProxy
from .loops import Runner
from .test_http1 import OK, pool_of

HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def started(first_reads: FirstReads | None) -> Http1Connection:
    connection = Http1Connection()
    connection.first_reads = first_reads
    connection.start(httpx.Request("GET", "http://upstream.test/"))
    return connection


async def resumed_order(first_reads: FirstReads | None) -> list[str]:
    """Which reader resumes first: a stream's, begun, given its next event in the same turn
    as a new response's head and first event, just before them."""
    begun, fresh = started(first_reads), started(first_reads)
    begun.data_received(HEAD + chunk(b"event 1"))
    await begun.read_head(None)
    assert await begun.read(None) == b"event 1"
    order: list[str] = []

    async def reads(name: str, connection: Http1Connection) -> None:
        await connection.read_head(None)
        order.append(f"{name}: {(await connection.read(None))!r}")

    tasks = [asyncio.ensure_future(reads(*each)) for each in (("begun", begun), ("fresh", fresh))]
    await asyncio.sleep(0)  # both wait for their bytes
    begun.data_received(chunk(b"event 2"))
    fresh.data_received(HEAD + chunk(b"event 1"))
    await asyncio.gather(*tasks)
    assert first_reads is None or first_reads.woken == 0
    return order


def test_a_new_responses_read_resumes_before_a_begun_streams_next(run: Runner) -> None:
    assert run(resumed_order(FirstReads())) == ["fresh: b'event 1'", "begun: b'event 2'"]


def test_without_it_readers_resume_in_the_order_their_bytes_came(run: Runner) -> None:
    assert run(resumed_order(None)) == ["begun: b'event 2'", "fresh: b'event 1'"]


def test_a_first_read_cancelled_once_woken_is_no_longer_counted(run: Runner) -> None:
    async def main() -> None:
        first_reads = FirstReads()
        connection = started(first_reads)
        waiting = asyncio.ensure_future(connection.read_head(None))
        await asyncio.sleep(0)
        connection.data_received(HEAD)
        assert first_reads.woken == 1
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert first_reads.woken == 0

    run(main())


def test_a_begun_stream_steps_behind_once_and_keeps_its_bytes_if_cancelled(run: Runner) -> None:
    async def main() -> None:
        first_reads = FirstReads()
        connection = started(first_reads)
        connection.data_received(HEAD + chunk(b"a"))
        assert await connection.read(None) == b"a"
        first_reads.woken = 1  # a first read that never resumes: no stream waits on it
        connection.data_received(chunk(b"b"))
        assert await connection.read(None) == b"b"  # (one step behind, then read)
        connection.data_received(chunk(b"c"))
        stepping = asyncio.ensure_future(connection.read(None))
        await asyncio.sleep(0)  # stepped behind
        stepping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stepping
        connection.data_received(b"0\r\n\r\n")
        assert await connection.read(None) == b"c"
        assert await connection.read(None) is None

    run(main())


def test_the_gateways_upstream_connections_let_first_reads_first(run: Runner) -> None:
    async def main() -> None:
        gateways = upstream_client(5.0)
        library = httpx.AsyncClient(transport=LeanTransport(), timeout=5.0)
        async with FaultProxy.running() as proxy, gateways, library:
            for client in (gateways, library):
                proxy.script(OK)
                assert (await client.get(proxy.url)).status_code == 200
            kept = {
                name: [c.first_reads for idle in pool_of(client).idle.values() for c in idle]
                for name, client in (("gateway", gateways), ("library", library))
            }
            shared = pool_of(gateways).first_reads
            assert isinstance(shared, FirstReads) and shared.woken == 0
            assert kept["gateway"] and all(each is shared for each in kept["gateway"])
            assert kept["library"] == [None]

    run(main())
