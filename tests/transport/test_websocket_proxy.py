"""The WebSocket connection through an HTTP proxy (docs/websocket.md): a CONNECT tunnel to the
emulator through a loopback proxy, named by the transport's ``proxy`` option or by the
environment (``ALL_PROXY``, ``HTTP_PROXY``; ``NO_PROXY`` goes direct); credentials sent as
``Proxy-Authorization``; a proxy that refuses the tunnel is a NetworkError naming its status,
never its credentials. Under asyncio and trio, on real sockets."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx
import pytest

import metis
from metis.errors import NetworkError
from metis.testing.emulator import Emulator
from metis.transport.proxy import environment_proxy

from .test_websocket_mode import STACK, session_on, transport_of, turns, ws_adapter

MAX_HEAD = 1 << 14
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)


@dataclass
class ConnectProxy:
    """A loopback HTTP proxy that opens CONNECT tunnels (or answers each with ``refusal``),
    keeping each CONNECT request's head."""

    refusal: bytes | None = None
    heads: list[str] = field(default_factory=list)
    url: str = ""

    @property
    def targets(self) -> list[str]:
        return [head.split(" ")[1] for head in self.heads]

    def header(self, name: str) -> list[str]:
        found = []
        for head in self.heads:
            for line in head.split("\r\n")[1:]:
                key, _, value = line.partition(":")
                if key.strip().lower() == name.lower():
                    found.append(value.strip())
        return found

    async def serve(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < MAX_HEAD:
                head += await client.receive()
            request, _, rest = head.partition(b"\r\n\r\n")
            self.heads.append(request.decode("latin-1"))
            if self.refusal is not None:
                await client.send(self.refusal)
                return
            host, _, port = self.targets[-1].rpartition(":")
            async with await anyio.connect_tcp(host, int(port)) as upstream:
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    await upstream.send(rest)
                async with anyio.create_task_group() as pipes:
                    pipes.start_soon(pipe, client, upstream, pipes.cancel_scope)
                    pipes.start_soon(pipe, upstream, client, pipes.cancel_scope)


async def pipe(
    source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream, scope: anyio.CancelScope
) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
        async for chunk in source:
            await sink.send(chunk)
    scope.cancel()


@contextlib.asynccontextmanager
async def running(proxy: ConnectProxy) -> AsyncIterator[ConnectProxy]:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        proxy.url = f"http://127.0.0.1:{port}"
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, proxy.serve)
            yield proxy
            group.cancel_scope.cancel()


@pytest.fixture
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def authority(emulator: Emulator) -> str:
    parts = urlsplit(emulator.url)
    return f"{parts.hostname}:{parts.port}"


@pytest.mark.anyio
async def test_the_proxy_option_tunnels_the_sessions_connection(
    emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    async with running(ConnectProxy()) as proxy:
        adapter = ws_adapter(emulator, proxy=proxy.url)
        async with adapter, session_on(adapter) as session:
            assert (await session.asend("Hello there")).text == "You said: Hello there"
            assert transport_of(adapter).holds(session.session_id)
            assert (await session.asend("And again")).text == "You said: And again"
    assert proxy.targets == [authority(emulator)]  # one tunnel, both turns on it
    assert proxy.heads[0].startswith(f"CONNECT {authority(emulator)} HTTP/1.1")
    assert all(r.websocket for r in turns(emulator))


@pytest.mark.anyio
@pytest.mark.parametrize("variable", ["ALL_PROXY", "HTTP_PROXY", "all_proxy"])
async def test_the_environments_proxy_tunnels_the_connection(
    variable: str, emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    async with running(ConnectProxy()) as proxy:
        no_proxy_environment.setenv(variable, proxy.url)
        adapter = ws_adapter(emulator)
        async with adapter, session_on(adapter) as session:
            assert (await session.asend("Hello")).text == "You said: Hello"
    assert proxy.targets == [authority(emulator)]
    assert all(r.websocket for r in turns(emulator))


@pytest.mark.anyio
async def test_no_proxy_and_an_empty_option_go_direct(
    emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    async with running(ConnectProxy()) as proxy:
        no_proxy_environment.setenv("ALL_PROXY", proxy.url)
        no_proxy_environment.setenv("NO_PROXY", "127.0.0.1,localhost")
        adapter = ws_adapter(emulator)
        async with adapter, session_on(adapter) as session:
            assert (await session.asend("Hello")).text == "You said: Hello"
        no_proxy_environment.delenv("NO_PROXY")
        direct = ws_adapter(emulator, proxy="")
        async with direct, session_on(direct) as session:
            assert (await session.asend("Hello")).text == "You said: Hello"
    assert proxy.heads == []
    assert all(r.websocket for r in turns(emulator))


@pytest.mark.anyio
async def test_credentials_in_the_proxy_url_are_sent_as_proxy_authorization(
    emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    async with running(ConnectProxy()) as proxy:
        with_credentials = proxy.url.replace("http://", "http://ann:s%3Acret@")
        adapter = ws_adapter(emulator, proxy=with_credentials)
        async with adapter, session_on(adapter) as session:
            await session.asend("Hello")
    expected = "Basic " + base64.b64encode(b"ann:s:cret").decode()
    assert proxy.header("proxy-authorization") == [expected]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n",
            "refused the tunnel to .* HTTP 407 Proxy Authentication Required",
        ),
        (b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n", "HTTP 502 Bad Gateway"),
        (b"", "closed the connection"),
        (b"garbage\r\n\r\n", "answered CONNECT badly"),
    ],
)
async def test_a_proxy_that_refuses_the_tunnel_is_a_network_error_without_its_credentials(
    answer: bytes, expected: str, emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    async with running(ConnectProxy(refusal=answer)) as proxy:
        secret = proxy.url.replace("http://", "http://ann:hunter2@")
        adapter = ws_adapter(emulator, proxy=secret)
        async with adapter, session_on(adapter) as session:
            with pytest.raises(NetworkError, match=expected) as caught:
                await session.asend("Hello")
    assert "hunter2" not in str(caught.value) and "ann" not in str(caught.value)
    assert turns(emulator) == []


@pytest.mark.anyio
async def test_an_unusable_proxy_url_is_a_network_error_naming_it(
    emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    adapter = ws_adapter(emulator, proxy="socks5://127.0.0.1:1080")
    async with adapter, session_on(adapter) as session:
        with pytest.raises(NetworkError, match="http:// or https://"):
            await session.asend("Hello")


def test_the_environment_names_the_proxy_by_scheme(
    no_proxy_environment: pytest.MonkeyPatch,
) -> None:
    no_proxy_environment.setenv("HTTPS_PROXY", "http://secure:3128")
    no_proxy_environment.setenv("HTTP_PROXY", "http://plain:3128")
    no_proxy_environment.setenv("NO_PROXY", "internal.example")
    assert environment_proxy("wss://api.openai.com/v1/responses") == "http://secure:3128"
    assert environment_proxy("ws://api.openai.com/v1/responses") == "http://plain:3128"
    assert environment_proxy("wss://internal.example/v1/responses") is None
    no_proxy_environment.delenv("HTTPS_PROXY")
    no_proxy_environment.setenv("ALL_PROXY", "http://every:3128")
    assert environment_proxy("wss://api.openai.com/v1/responses") == "http://every:3128"


def test_the_proxy_option_is_documented_on_the_transport() -> None:
    adapter = metis.build_adapter("openai_responses_ws", api_key="k")
    assert transport_of(adapter).options.proxy is None


@pytest.mark.anyio
@pytest.mark.parametrize("package", ["httpx", "httpx2"])
@pytest.mark.usefixtures("one_default_httpx2_tls_context")
async def test_the_http_clients_proxy_tunnels_the_connection_with_its_credentials(
    package: str, emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    client_package = pytest.importorskip(package)
    async with running(ConnectProxy()) as proxy:
        with_credentials = proxy.url.replace("http://", "http://ann:s%3Acret@")
        async with client_package.AsyncClient(proxy=with_credentials) as client:
            adapter = metis.build_adapter(
                STACK, api_key="k", base_url=emulator.url, max_retries=0, http_client=client
            )
            async with adapter, session_on(adapter) as session:
                assert (await session.asend("Hello")).text == "You said: Hello"
                assert (await session.asend("Again")).text == "You said: Again"
    assert proxy.targets == [authority(emulator)]
    expected = "Basic " + base64.b64encode(b"ann:s:cret").decode()
    assert proxy.header("proxy-authorization") == [expected]
    assert all(r.websocket for r in turns(emulator))


@pytest.mark.anyio
async def test_a_client_that_ignores_the_environment_goes_direct(
    emulator: Emulator, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    async with running(ConnectProxy()) as proxy:
        no_proxy_environment.setenv("ALL_PROXY", proxy.url)
        async with httpx.AsyncClient(trust_env=False) as client:
            adapter = metis.build_adapter(
                STACK, api_key="k", base_url=emulator.url, max_retries=0, http_client=client
            )
            async with adapter, session_on(adapter) as session:
                assert (await session.asend("Hello")).text == "You said: Hello"
    assert proxy.heads == []
    assert all(r.websocket for r in turns(emulator))
