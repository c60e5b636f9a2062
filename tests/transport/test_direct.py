"""A client marked to send its requests itself (metis/transport/direct.py; the clients metis
makes): each request as httpx would build it, from what it keeps of the URL and headers,
handed to the client's own transport; nothing of one request in another; cookies kept as
httpx keeps them, or (the gateway's upstream clients) not at all."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import httpx
import pytest

from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.transport import direct
from metis.transport.direct import send_directly
from metis.transport.exchange import Limits, open_exchange
from metis.transport.routes import Routes, register
from metis.transport.stage import http_client

pytestmark = pytest.mark.anyio
URL = "https://api.example.com/v1/chat/completions"


def _routed(answer: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    """A client over a mock transport, whose routes are known as those of a client metis made."""
    transport = httpx.MockTransport(answer)
    client = httpx.AsyncClient(transport=transport)
    register(client, Routes(transport, {}))
    return client


def _call() -> Call:
    return Call(
        request_id="req_1",
        provider="openai",
        model="openai:gpt-x",
        wire_model="gpt-x",
        deadline=anyio.current_time() + 30,
    )


async def _asked(client: httpx.AsyncClient, body: dict[str, str]) -> None:
    wire = WireRequest(URL, body, {"authorization": "Bearer sk-1"}, stream=False).serialized()
    exchange = await open_exchange(client, wire, _call(), Limits())
    await exchange.body()
    await exchange.aclose()


async def _seen(marked: bool) -> list[httpx.Request]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True}, headers={"set-cookie": "lb=node-7; Path=/"})

    client = _routed(answer)
    if marked:
        send_directly(client, keep_cookies=False)
    async with client:
        await _asked(client, {"model": "gpt-x", "said": "one"})
        await _asked(client, {"model": "gpt-x", "said": "a second, longer body"})
    return seen


async def test_the_next_request_carries_no_cookie_an_answer_set() -> None:
    kept = await _seen(marked=False)  # httpx's own client keeps it
    assert kept[1].headers.get("cookie") == "lb=node-7"
    first, second = await _seen(marked=True)
    assert "cookie" not in first.headers and "cookie" not in second.headers


async def test_each_request_is_what_httpx_would_have_built() -> None:
    plain, marked = await _seen(marked=False), await _seen(marked=True)
    for mine, theirs in zip(marked, plain, strict=True):
        assert str(mine.url) == str(theirs.url) and mine.method == theirs.method
        assert mine.content == theirs.content
        drop = {"cookie"}
        assert [(k, v) for k, v in mine.headers.multi_items() if k not in drop] == [
            (k, v) for k, v in theirs.headers.multi_items() if k not in drop
        ]
        assert mine.extensions["timeout"].keys() == theirs.extensions["timeout"].keys()
    assert marked[1].headers["content-length"] == str(len(marked[1].content))


async def _sent_by(client: httpx.AsyncClient, headers: dict[str, str], seconds: float) -> None:
    wire = WireRequest(URL, {"model": "gpt-x"}, headers, stream=False).serialized()
    call = _call()
    call.deadline = anyio.current_time() + seconds
    exchange = await open_exchange(client, wire, call, Limits(connect_timeout=seconds))
    await exchange.body()
    await exchange.aclose()


def _recording(cookie: str | None = None) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={}, headers={"set-cookie": cookie} if cookie else {})

    return _routed(answer), seen


@pytest.mark.parametrize("keep_cookies", [True, False])
async def test_no_request_carries_what_another_request_carried(keep_cookies: bool) -> None:
    client, seen = _recording()
    send_directly(client, keep_cookies=keep_cookies)
    async with client:
        await _sent_by(client, {"authorization": "Bearer sk-1", "x-trace": "a"}, 30)
        seen[0].headers["x-added-by-a-hook"] = "1"
        seen[0].extensions["sni_hostname"] = "elsewhere"
        await _sent_by(client, {"authorization": "Bearer sk-2", "x-trace": "a"}, 30)
        await _sent_by(client, {"authorization": "Bearer sk-1", "x-trace": "a"}, 5)
    first, second, third = seen
    assert first.headers["authorization"] == "Bearer sk-1"
    assert second.headers["authorization"] == "Bearer sk-2"
    assert third.headers["authorization"] == "Bearer sk-1"
    assert "x-added-by-a-hook" not in second.headers and "x-added-by-a-hook" not in third.headers
    assert "sni_hostname" not in third.extensions
    assert first.extensions["timeout"]["connect"] > 20
    assert third.extensions["timeout"]["connect"] <= 5
    assert third.extensions["timeout"]["read"] <= 5


async def test_a_change_to_the_clients_own_headers_or_base_is_seen_by_the_next_request() -> None:
    client, seen = _recording()
    send_directly(client)
    async with client:
        await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)
        await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)  # from what was kept
        client.headers["x-app"] = "set later"
        await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)
        client.headers = httpx.Headers({"x-other": "replaced"})
        await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)
    assert "x-app" not in seen[1].headers
    assert seen[2].headers["x-app"] == "set later"
    assert seen[3].headers["x-other"] == "replaced" and "x-app" not in seen[3].headers


async def test_a_client_that_keeps_cookies_keeps_them_as_httpx_does() -> None:
    client, seen = _recording(cookie="lb=node-7; Path=/")
    send_directly(client)
    async with client:
        for _ in range(3):
            await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)
    assert "cookie" not in seen[0].headers
    assert seen[1].headers["cookie"] == "lb=node-7" and seen[2].headers["cookie"] == "lb=node-7"


def test_the_client_metis_makes_sends_directly_and_keeps_cookies() -> None:
    client = http_client(lean=False)
    assert direct._CLIENTS[client].keep_cookies is True


async def test_httpxs_request_line_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    client, _ = _recording()
    send_directly(client)
    async with client:
        await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)
        await _sent_by(client, {"authorization": "Bearer sk-1"}, 30)
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines == [f'HTTP Request: POST {URL} "HTTP/1.1 200 OK"'] * 2


async def test_auth_of_httpxs_still_goes_through_httpx() -> None:
    client, seen = _recording()
    client.auth = httpx.BasicAuth("user", "pass")
    send_directly(client)
    userinfo, seen_too = _recording()
    send_directly(userinfo)
    async with client, userinfo:
        await _sent_by(client, {"x-trace": "a"}, 30)
        await _sent_by(client, {"x-trace": "a"}, 30)
        wire = WireRequest(URL.replace("https://", "https://u:p@"), {}, {}, stream=False)
        exchange = await open_exchange(userinfo, wire.serialized(), _call(), Limits())
        await exchange.aclose()
    assert all(r.headers["authorization"].startswith("Basic ") for r in seen)
    assert seen_too[0].headers["authorization"].startswith("Basic ")


async def test_a_request_goes_to_the_transport_its_routes_name() -> None:
    seen: list[str] = []

    def by(name: str) -> httpx.MockTransport:
        return httpx.MockTransport(lambda request: seen.append(name) or httpx.Response(200))

    own, proxied = by("own"), by("proxied")
    client = httpx.AsyncClient(transport=own)
    register(client, Routes(own, {"https://": proxied, "all://*.example.com": None}))
    send_directly(client)
    async with client:
        await _asked(client, {"model": "gpt-x"})
        request = client.build_request("POST", "https://api.other.test/v1", content=b"{}")
        assert (await direct.sent(client, request)) is not None
        unknown = httpx.AsyncClient(transport=own)
        send_directly(unknown)
        assert (await direct.sent(unknown, request)) is None  # routes unknown: httpx sends it
    assert seen == ["own", "proxied"]
