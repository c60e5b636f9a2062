"""A request cancelled while httpcore hands it a new connection (metis/transport/slots.py
``drop_unclaimed_connections``): the connection, never opened, does not stay in the pool of the
client metis makes, where it would hold one of the pool's places for good."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpcore
import pytest

import metis
from metis import CanonicalRequest, Message
from metis.testing.emulator import Emulator


@pytest.fixture(autouse=True, scope="module")
def _httpxs_own_transport() -> Iterator[None]:
    """What this module checks is httpx's transport (httpcore's pool, h11): the client metis
    makes is put on it (``METIS_HTTP_TRANSPORT``; the lean one is the default)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("METIS_HTTP_TRANSPORT", "httpx")
        yield


def question() -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5", messages=[Message.user("hi")], max_output_tokens=50
    )


def stranded(adapter: Any) -> list[Any]:
    pool = adapter.http_client()._transport._pool
    claimed = {id(r.connection) for r in pool._requests}
    return [
        c
        for c in pool._connections
        if c._connection is None and not c._connect_failed and id(c) not in claimed
    ]


@pytest.mark.anyio
async def test_a_request_cancelled_as_it_is_given_a_connection_leaves_none_behind(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = anyio.Event()
    original = httpcore._async.connection_pool.AsyncPoolRequest.wait_for_connection

    async def held(self: Any, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        if self.connection is not None and not given.is_set():
            given.set()  # the connection is given; the request is cancelled before it runs
            await anyio.sleep_forever()
        return await original(self, timeout)

    monkeypatch.setattr(
        httpcore._async.connection_pool.AsyncPoolRequest, "wait_for_connection", held
    )
    adapter = metis.build_adapter("anthropic", api_key="k", base_url=emulator.url, max_retries=0)
    async with adapter:
        async with anyio.create_task_group() as group:
            group.start_soon(adapter.complete, question())
            await given.wait()
            group.cancel_scope.cancel()  # the caller goes away as the connection is given
        assert stranded(adapter) == []
        reply = await adapter.complete(question())  # the pool still serves
        assert reply.content


@pytest.mark.anyio
async def test_a_request_cancelled_after_its_connection_opened_leaves_none_behind(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled once its connection is open, before the request takes it (httpcore's
    HTTP/1.1 connection still NEW): the connection is closed and dropped, not left open."""
    opened = anyio.Event()
    http11 = httpcore._async.http11.AsyncHTTP11Connection
    original = http11.handle_async_request

    async def held(self: Any, request: Any) -> Any:
        if not opened.is_set():
            opened.set()
            await anyio.sleep_forever()
        return await original(self, request)

    monkeypatch.setattr(http11, "handle_async_request", held)
    adapter = metis.build_adapter("anthropic", api_key="k", base_url=emulator.url, max_retries=0)
    async with adapter:
        async with anyio.create_task_group() as group:
            group.start_soon(adapter.complete, question())
            await opened.wait()
            group.cancel_scope.cancel()
        pool = adapter.http_client()._transport._pool
        assert [c for c in pool._connections if not c.is_idle() and not c.is_closed()] == []
        reply = await adapter.complete(question())  # the pool still serves
        assert reply.content
