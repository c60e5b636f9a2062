"""A call cancelled while its request body is being written (metis/transport/request_body.py):
no ResourceWarning (under trio, httpx's body generator was collected unfinished, one warning
per call), no connection left busy, and the next call on the same adapter served whole."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import h11
import httpx
import pytest
from httpcore._async.http11 import AsyncHTTP11Connection

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator
from metis.transport.loop_clients import running_loop
from metis.transport.request_body import OnceBody, sent_once

from ..unclosed import unclosed_by

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True, scope="module")
def _httpxs_own_transport() -> Iterator[None]:
    """What this module checks is httpx's transport (httpcore's pool, h11): the client metis
    makes is put on it (``METIS_HTTP_TRANSPORT``; the lean one is the default)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("METIS_HTTP_TRANSPORT", "httpx")
        yield


def busy(adapter: Adapter) -> int:
    pool = adapter.http_client()._transport._pool  # type: ignore[attr-defined]
    held = [c for c in pool.connections if not (c.is_idle() or c.is_closed())]
    return len(held) + len(pool._requests)


async def stream_all(adapter: Adapter, request: CanonicalRequest) -> None:
    async for _ in adapter.stream(request):
        pass


CALLS: dict[str, Callable[[Adapter, CanonicalRequest], Awaitable[Any]]] = {
    "stream": stream_all,
    "complete": lambda adapter, request: adapter.complete(request),
    "count_tokens": lambda adapter, request: adapter.count_tokens(request),
}


async def test_a_call_cancelled_as_its_body_is_sent_leaves_nothing_behind(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    scopes: list[anyio.CancelScope] = []
    send_event = AsyncHTTP11Connection._send_event

    async def cancelled_at_the_body(self: Any, event: Any, **options: Any) -> None:
        if isinstance(event, h11.Data) and scopes:
            scopes.pop().cancel()
            await anyio.lowlevel.checkpoint()  # the cancel lands here, the body half sent
        await send_event(self, event, **options)

    monkeypatch.setattr(AsyncHTTP11Connection, "_send_event", cancelled_at_the_body)
    config = AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"), max_retries=0)
    adapter = build_adapter("anthropic", config)
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5", messages=[Message.user("hi")], max_output_tokens=20
    )
    gc.collect()  # what other tests left unclosed says so now, not in the block below
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for name, call in CALLS.items():
                with anyio.fail_after(30), anyio.CancelScope() as scope:  # a bound on a hang
                    scopes.append(scope)
                    await call(adapter, request)
                assert scope.cancelled_caught, name
                assert busy(adapter) == 0, name
                gc.collect()
            answer = await adapter.complete(request)  # the connection after is a whole one
        assert answer.text
        assert unclosed_by(caught, [running_loop()]) == []
    finally:
        await adapter.aclose()


def test_only_httpx_bodies_of_bytes_are_replaced() -> None:
    client = httpx.AsyncClient()
    whole = sent_once(client.build_request("POST", "http://x/", content=b"abc"))
    assert isinstance(whole.stream, OnceBody) and whole.content == b"abc"
    assert list(whole.stream) == [b"abc"]

    async def pieces() -> Any:
        yield b"a"

    streamed = client.build_request("POST", "http://x/", content=pieces())
    assert sent_once(streamed).stream is streamed.stream
