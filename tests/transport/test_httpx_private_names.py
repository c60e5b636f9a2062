"""The private names of httpx metis reads (a client's ``_transport``, ``_mounts`` and
``_transport_for_url``, a transport's ``_pool``), said once in metis/transport/httpx_private.py.
Simulated here as a release that moves them: a client that keeps its transports under other
names (httpx's own sending made to use those). Each reader falls back to doing without what
the name gave, never a bare AttributeError, a warning names what is missing once, and a
call and the gateway's upstream client still work."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, CanonicalRequest, Message, build_adapter
from metis.pipeline.stores import InMemoryToolIdStore
from metis.transport import connect, httpx_private, slots
from metis.transport.clients import sends_over_network
from metis.transport.pool_scan import linear_pools
from metis.transport.proxy import client_proxy
from metis.transport.routes import choice_replaced

REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


class MovedNames(httpx.AsyncClient):
    """An httpx client as a release keeping its transports under other names would be: the
    old names gone, httpx's own choice of transport and closing reading the new ones."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._own_transport = self.__dict__.pop("_transport")
        self._mounted = self.__dict__.pop("_mounts")

    def _transport_for_url(self, url: httpx.URL) -> httpx.AsyncBaseTransport:
        for pattern, transport in self._mounted.items():
            if pattern.matches(url):
                return transport or self._own_transport
        return self._own_transport

    async def aclose(self) -> None:
        await self._own_transport.aclose()
        for transport in self._mounted.values():
            if transport is not None:
                await transport.aclose()


def moved(**kwargs: Any) -> MovedNames:
    client = MovedNames(**kwargs)
    assert not hasattr(client, "_transport") and not hasattr(client, "_mounts")
    return client


def test_each_reader_does_without_a_moved_name(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(httpx_private, "_warned", set())  # said once a process: said here
    client = moved()
    with caplog.at_level(logging.WARNING, logger="metis.transport"):
        assert not linear_pools(client)  # the one-pass bookkeeping not given
        assert not connect.install(client)  # the connect backend not installed
        assert not sends_over_network(client)
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "_transport" in said and httpx.__version__ in said


@pytest.mark.anyio
async def test_unclaimed_connections_are_left_when_the_pools_cannot_be_found() -> None:
    client = moved()
    await slots.drop_unclaimed_connections(client)  # nothing to find: nothing done
    await client.aclose()


def test_a_proxy_is_not_said_by_a_client_whose_choice_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(httpx_private, "CHOOSER", "_no_such_chooser")
    client = httpx.AsyncClient(proxy="http://proxy.example:3128")
    assert client_proxy(client, "wss://api.openai.com/v1/responses") is None  # the env's then
    assert choice_replaced()  # httpx's own send chooses: a request goes through it


def test_a_transport_whose_pool_moved_gives_none() -> None:
    transport = httpx.AsyncHTTPTransport()
    pool = transport.__dict__.pop("_pool")
    assert httpx_private.transport_pool(transport) is None
    assert not connect.install_on(transport)
    transport._pool = pool  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_call_through_a_client_whose_names_moved() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=REPLY)

    client = moved(transport=httpx.MockTransport(answer))
    adapter = build_adapter(
        "openai",
        AdapterConfig(api_key="k", http_client=client),
        tool_id_store=InMemoryToolIdStore(),
    )
    request = CanonicalRequest(
        model="openai:gpt-4o", messages=[Message.user("Hi")], max_output_tokens=16
    )
    response = await adapter.complete(request)
    assert [b.text for b in response.content] == ["Hi"]  # type: ignore[union-attr]
    assert len(sent) == 1
    await client.aclose()


def test_the_gateways_upstream_client_is_made_when_the_names_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``metis serve`` makes one for each adapter entry as it starts: a bare AttributeError
    there stopped the gateway from starting at all."""
    from metis.gateway.upstream_pool import upstream_client

    monkeypatch.setattr(httpx, "AsyncClient", MovedNames)
    client = upstream_client(30.0)
    assert isinstance(client, MovedNames)
