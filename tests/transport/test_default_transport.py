"""The client metis makes sends over the lean transport by default (docs/http-client.md,
"Which transport"), and hands a request to httpx's own transport whenever httpx is mocked:
respx (httpcore's pool and connection patched, or the client's transport choice) and
pytest-httpx (httpx's transport patched) see every call of a default adapter, under asyncio
and trio. ``METIS_HTTP_TRANSPORT=httpx`` brings httpx's own transport back; a client the
application gives is used as it is."""

from __future__ import annotations

import json
import sys
from typing import Any
from unittest import mock

import httpx
import pytest
import respx
from pytest_httpx import HTTPXMock

from metis import AdapterConfig, build_adapter
from metis.errors import ConfigError
from metis.model import CanonicalRequest, Message, TextDelta
from metis.transport.connect import ConnectBackend
from metis.transport.http1 import LeanTransport, mocked
from metis.transport.slots import slots_of
from metis.transport.stage import TRANSPORT_SETTING, http_client

from ..fault_proxy import FaultProxy, response

pytestmark = pytest.mark.anyio

URL = "https://api.anthropic.com/v1/messages"
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello!"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 9, "output_tokens": 3},
}
EVENTS = [
    {
        "type": "message_start",
        "message": {"id": "m", "model": "x", "usage": {"input_tokens": 1, "output_tokens": 1}},
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]
SSE = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in EVENTS)


def request(stream: bool = False) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("Hi")],
        max_output_tokens=64,
        stream=stream,
    )


def lean_pool_unused(adapter: Any) -> bool:
    """The adapter's own client is on the lean transport, which sent nothing itself."""
    transport = adapter.http_client()._transport
    return isinstance(transport, LeanTransport) and transport._pool.total == 0


@pytest.fixture(autouse=True)
def _default_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRANSPORT_SETTING, raising=False)


# The default and the setting -------------------------------------------------------------


async def test_the_adapters_own_client_sends_over_the_lean_transport() -> None:
    async with build_adapter("anthropic", AdapterConfig(api_key="k")) as adapter:
        client = adapter.http_client()
        assert isinstance(client._transport, LeanTransport)
        assert client.follow_redirects is False


@pytest.mark.parametrize("value", ["httpx", "lean", ""])
def test_the_setting_names_the_transport(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(TRANSPORT_SETTING, value)
    client = http_client(10.0)
    wanted = httpx.AsyncHTTPTransport if value == "httpx" else LeanTransport
    assert type(client._transport) is wanted
    assert type(http_client(10.0, lean=value != "httpx")._transport) is wanted


async def test_an_unknown_setting_is_a_config_error_naming_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TRANSPORT_SETTING, "h11")
    with pytest.raises(ConfigError, match=r"METIS_HTTP_TRANSPORT='h11'.*'lean'.*'httpx'"):
        http_client(10.0)
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k"))
    with pytest.raises(ConfigError, match="METIS_HTTP_TRANSPORT"):
        await adapter.complete(request())


async def test_without_httptools_the_default_is_httpxs_own_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "metis.transport.http1", None)  # its import fails
    client = http_client(10.0)
    assert isinstance(client._transport, httpx.AsyncHTTPTransport)
    assert isinstance(client._transport._pool._network_backend, ConnectBackend)
    assert slots_of(client, client.build_request("GET", URL)) is not None


async def test_a_given_client_is_used_as_it_is() -> None:
    mine = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(200, json=MESSAGE))
    )
    async with build_adapter("anthropic", AdapterConfig(api_key="k", http_client=mine)) as adapter:
        assert adapter.http_client() is mine
        assert (await adapter.complete(request())).text == "Hello!"
    assert isinstance(mine._transport, httpx.MockTransport)
    assert slots_of(mine, mine.build_request("POST", URL)) is None
    await mine.aclose()


async def test_proxies_from_the_environment_go_through_httpxs_transport_with_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = http_client(10.0)
    assert isinstance(client._transport, LeanTransport)
    proxied = client._transport_for_url(httpx.URL(URL))
    assert isinstance(proxied, httpx.AsyncHTTPTransport)
    assert isinstance(proxied._pool._network_backend, ConnectBackend)
    assert slots_of(client, client.build_request("POST", URL)) is not None
    plain = client.build_request("POST", "http://127.0.0.1:8/v1/messages")
    assert client._transport_for_url(plain.url) is client._transport


async def test_a_default_adapters_call_goes_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FaultProxy.running() as proxy:
        for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        proxy.script(response(200, json.dumps(MESSAGE).encode()))
        config = AdapterConfig(api_key="k", base_url="http://upstream.invalid:9")
        async with build_adapter("anthropic", config) as adapter:
            assert isinstance(adapter.http_client()._transport, LeanTransport)
            assert (await adapter.complete(request())).text == "Hello!"
    (seen,) = proxy.requests
    assert (seen.method, seen.target) == ("POST", "http://upstream.invalid:9/v1/messages")


async def test_slots_only_for_what_httpxs_transport_sends(anyio_backend: str) -> None:
    """On asyncio the lean transport carries the request and its pool queues it: no slot; on
    trio it goes to httpx's own transport, which waits for a slot first, as before."""
    client = http_client(10.0)
    sent = client.build_request("POST", "http://127.0.0.1:8/v1/messages")
    assert client._transport.carries(sent) is (anyio_backend == "asyncio")
    assert (slots_of(client, sent) is None) is (anyio_backend == "asyncio")


# Mocks of httpx see a default adapter's calls ------------------------------------------------


async def test_respx_sees_a_default_adapters_calls() -> None:
    with respx.mock:  # respx's default: httpcore's pool and connection patched
        assert mocked()
        whole = respx.post(URL).mock(return_value=httpx.Response(200, json=MESSAGE))
        async with build_adapter("anthropic", AdapterConfig(api_key="sk-test")) as adapter:
            reply = await adapter.complete(request())
            sent = whole.calls.last.request
            whole.mock(
                return_value=httpx.Response(
                    200, text=SSE, headers={"content-type": "text/event-stream"}
                )
            )
            streamed = [e async for e in adapter.stream(request(stream=True))]
            assert lean_pool_unused(adapter)
    assert reply.text == "Hello!"
    assert sent.headers["x-api-key"] == "sk-test"
    assert json.loads(sent.content)["model"] == "claude-sonnet-4-5"
    assert [e.text for e in streamed if isinstance(e, TextDelta)] == ["Hi"]
    assert whole.call_count == 2
    assert not mocked()


async def test_respx_mocking_the_clients_transport_choice_sees_them_too() -> None:
    with respx.mock(using="httpx") as router:
        route = router.post(URL).mock(return_value=httpx.Response(200, json=MESSAGE))
        async with build_adapter("anthropic", AdapterConfig(api_key="k")) as adapter:
            assert (await adapter.complete(request())).text == "Hello!"
    assert route.called


async def test_respx_refuses_a_call_it_has_no_route_for() -> None:
    with respx.mock(assert_all_called=False) as router:
        router.post("https://example.invalid/").mock(return_value=httpx.Response(200))
        async with build_adapter("anthropic", AdapterConfig(api_key="k")) as adapter:
            with pytest.raises(Exception, match="not mocked"):
                await adapter.complete(request())
            assert lean_pool_unused(adapter)


async def test_pytest_httpx_sees_a_default_adapters_calls(httpx_mock: HTTPXMock) -> None:
    assert mocked()
    httpx_mock.add_response(url=URL, method="POST", json=MESSAGE)
    httpx_mock.add_response(
        url=URL, method="POST", text=SSE, headers={"content-type": "text/event-stream"}
    )
    async with build_adapter("anthropic", AdapterConfig(api_key="sk-test")) as adapter:
        reply = await adapter.complete(request())
        streamed = [e async for e in adapter.stream(request(stream=True))]
        assert lean_pool_unused(adapter)
    assert reply.text == "Hello!"
    assert [e.text for e in streamed if isinstance(e, TextDelta)] == ["Hi"]
    first, second = httpx_mock.get_requests()
    assert first.headers["x-api-key"] == "sk-test"
    assert json.loads(second.content)["stream"] is True


def test_a_mock_is_seen_whenever_it_was_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check keeps only what it saw to be httpx's and httpcore's own methods: a mock
    started before any check, or between two, is seen, and so is its end."""
    from metis.transport import http1

    monkeypatch.setattr(http1, "_GENUINE", {})  # as if no request had been checked before
    with respx.mock:
        assert mocked()
    assert not mocked()
    with respx.mock:  # started after a check that found every method its own
        assert mocked()
    assert not mocked()
    replaced = mock.AsyncMock(spec=httpx.AsyncHTTPTransport.handle_async_request)
    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", replaced)
    assert mocked()
