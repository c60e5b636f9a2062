"""The spare connection a pool of the lean transport keeps when asked (the gateway's upstream
pools: metis/gateway/upstream_pool.py; metis/transport/http1_pool.py): the request that
takes or opens an origin's last idle connection leaves one more opening, which the next
request finds idle; one at a time, within the limits; a spare that fails or cannot be used
is dropped; a closed pool keeps none; a library's pools keep none."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx

from metis.gateway.upstream_pool import upstream_client
from metis.transport.http1 import LeanTransport
from metis.transport.http1_pool import Pool
from metis.transport.http1_protocol import Http1Connection

from ..fault_proxy import HANG, FaultProxy, chunk, chunked_head
from .loops import Runner
from .test_http1 import OK, pool_of, until

ORIGIN = ("http", "upstream", 80)


def spare_client(**limits: Any) -> httpx.AsyncClient:
    transport = LeanTransport(limits=httpx.Limits(**limits))
    transport.keep_spare()
    return httpx.AsyncClient(transport=transport, timeout=5.0)


def test_the_next_stream_takes_the_spare_the_last_one_left(run: Runner) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy, spare_client() as client:
            proxy.script(chunked_head(), chunk(b"a"), HANG)
            proxy.script(OK)
            async with client.stream("GET", proxy.url) as held:
                await held.aiter_raw().__anext__()
                await until(lambda: pool_of(client).idle_count == 1)  # the spare, open
                await until(lambda: proxy.connections == 2)  # (the proxy's accept)
                answer = await client.get(proxy.url)  # takes it, and leaves a spare opening
                assert answer.status_code == 200
                assert [seen.connection for seen in proxy.requests] == [1, 2]
                await until(lambda: pool_of(client).idle_count == 2)
                await until(lambda: proxy.connections == 3)
                assert pool_of(client).total == 3

    run(main())


def test_a_librarys_pool_keeps_no_spare(run: Runner) -> None:
    async def main() -> None:
        transport = LeanTransport()
        async with FaultProxy.running() as proxy, httpx.AsyncClient(transport=transport) as client:
            proxy.script(chunked_head(), chunk(b"a"), HANG)
            async with client.stream("GET", proxy.url) as held:
                await held.aiter_raw().__anext__()
                await asyncio.sleep(0.05)
                assert proxy.connections == 1
                assert pool_of(client).idle_count == 0

    run(main())


def test_the_gateways_upstream_pools_keep_a_spare() -> None:
    transport = upstream_client(30.0)._transport
    assert isinstance(transport, LeanTransport)
    assert transport._pool.spare


async def spared(pool: Pool) -> None:
    await until(lambda: not pool.sparing)


class Opener:
    """Connections that open at once, or fail, or wait for ``release``; counted."""

    def __init__(self, *outcomes: str) -> None:
        self.outcomes = list(outcomes)
        self.opened = 0
        self.release = asyncio.Event()

    async def __call__(self) -> Http1Connection:
        self.opened += 1
        outcome = self.outcomes.pop(0) if self.outcomes else "open"
        if outcome == "fail":
            raise httpx.ConnectError("refused")
        if outcome == "wait":
            await self.release.wait()
        return Http1Connection()  # never connected: not usable idle


def test_a_spare_that_fails_or_cannot_be_used_is_dropped_silently(run: Runner) -> None:
    async def main() -> None:
        for outcome in ("fail", "open"):
            pool = Pool(httpx.Limits(), spare=True)
            opener = Opener("open", outcome)
            taken = await pool.acquire(ORIGIN, None, opener)
            assert pool.total == 2  # the request's, and the spare being opened
            await spared(pool)
            assert opener.opened == 2
            assert pool.total == 1
            assert pool.idle_count == 0
            assert isinstance(taken, Http1Connection)

    run(main())


def test_one_spare_at_a_time_and_none_past_the_limit(run: Runner) -> None:
    async def main() -> None:
        pool = Pool(httpx.Limits(max_connections=3), spare=True)
        opener = Opener("open", "wait", "open")
        await pool.acquire(ORIGIN, None, opener)
        await until(lambda: opener.opened == 2)  # the spare, opening
        await pool.acquire(ORIGIN, None, opener)  # its own; the spare is still opening
        assert pool.total == 3
        assert len(pool.sparing) == 1
        opener.release.set()
        await spared(pool)
        assert pool.total == 2  # the spare was not usable idle (never connected)
        limited = Pool(httpx.Limits(max_connections=1), spare=True)
        await limited.acquire(ORIGIN, None, Opener())
        assert not limited.sparing
        assert limited.total == 1

    run(main())


def test_closing_the_pool_cancels_a_spare_being_opened(run: Runner) -> None:
    async def main() -> None:
        pool = Pool(httpx.Limits(), spare=True)
        opener = Opener("open", "wait")
        await pool.acquire(ORIGIN, None, opener)
        await until(lambda: opener.opened == 2)
        task = pool.sparing[ORIGIN]
        pool.close()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        assert pool.total == 1  # the request's, closed when its response is
        assert not pool.sparing
        assert pool.max_connections == math.inf

    run(main())
