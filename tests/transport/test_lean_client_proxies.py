"""The client metis makes on its lean transport (``http_client(lean=True)``, the gateway's
upstream client) sends through the proxy the environment names, as the default client does
and as docs/http-client.md says: httpx reads the environment's proxies only for a client
made without a transport of its own."""

from __future__ import annotations

import asyncio

import pytest

from metis.gateway.upstream_pool import upstream_client
from metis.transport.stage import http_client

from ..fault_proxy import FaultProxy, response

pytest.importorskip("httptools")


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.mark.parametrize("made_by", ["http_client", "upstream_client"])
@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY"])
def test_the_lean_client_sends_through_the_environments_proxy(
    no_proxies: pytest.MonkeyPatch, variable: str, made_by: str
) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy:
            proxy.script(response(200, b'{"ok":true}'))
            no_proxies.setenv(variable, proxy.url)
            lean = http_client(30.0, lean=True) if made_by == "http_client" else None
            async with lean or upstream_client(30.0) as client:
                answer = await client.post("http://upstream.invalid/v1/messages", content=b"{}")
            assert answer.json() == {"ok": True}
            assert [seen.target for seen in proxy.requests] == [
                "http://upstream.invalid/v1/messages"
            ]

    asyncio.run(main())


def test_a_host_no_proxy_names_goes_direct_on_the_lean_transport(
    no_proxies: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        async with FaultProxy.running() as upstream:
            upstream.script(response(200, b'{"ok":true}'))
            no_proxies.setenv("HTTP_PROXY", "http://127.0.0.1:9")
            no_proxies.setenv("NO_PROXY", "127.0.0.1")
            async with http_client(30.0, lean=True) as client:
                answer = await client.get(upstream.url + "/v1/models")
            assert answer.json() == {"ok": True}
            assert type(client._transport).__name__ == "LeanTransport"

    asyncio.run(main())
