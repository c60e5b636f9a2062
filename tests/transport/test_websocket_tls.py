"""``wss://`` end to end (docs/websocket.md "Proxies and TLS"): the emulator's WebSocket mode
served over TLS on loopback (a trustme CA and server certificate), reached through a loopback
HTTP CONNECT proxy named the way users name it (``HTTPS_PROXY``, or the transport's ``proxy``
option), the server's certificate verified against the CA given to the adapter's HTTP client
(``verify=``), as the HTTP calls verify it. A certificate the client does not trust is a
NetworkError saying so, never a hang or a bare ssl error. Under asyncio and trio, on real
sockets."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx
import pytest
import trustme
from anyio.streams.tls import TLSStream

import metis
from metis.adapter import Adapter
from metis.errors import NetworkError
from metis.testing.emulator import Emulator
from metis.transport.ws_stage import WebSocketTransport

from .test_websocket_mode import STACK, get_weather, session_on, transport_of, turns
from .test_websocket_proxy import ConnectProxy, pipe, running

TLS_FAILURES = (anyio.BrokenResourceError, anyio.EndOfStream, ssl.SSLError, OSError)


@dataclass
class TLSFront:
    """A loopback TLS server in front of the emulator: each connection's TLS is ended here
    with ``certificate`` and its bytes relayed to the emulator. Keeps the ALPN protocol each
    handshake chose (None: none offered) and answers none whose client chose ``h2``, as an
    HTTP/2 server would not read an HTTP/1.1 upgrade."""

    upstream: Emulator
    context: ssl.SSLContext
    port: int = 0
    handshakes: list[str | None] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, client: anyio.abc.SocketStream) -> None:
        with contextlib.suppress(*TLS_FAILURES):
            secure = await TLSStream.wrap(client, server_side=True, ssl_context=self.context)
            protocol = secure.extra(anyio.streams.tls.TLSAttribute.alpn_protocol)
            self.handshakes.append(protocol)
            if protocol == "h2":
                await secure.aclose()
                return
            parts = urlsplit(self.upstream.url)
            up = await anyio.connect_tcp(parts.hostname or "", parts.port or 80)
            async with secure, up, anyio.create_task_group() as pipes:
                pipes.start_soon(pipe, secure, up, pipes.cancel_scope)
                pipes.start_soon(pipe, up, secure, pipes.cancel_scope)


@contextlib.asynccontextmanager
async def tls_front(front: TLSFront) -> AsyncIterator[TLSFront]:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        front.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, front.serve)
            yield front
            group.cancel_scope.cancel()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA, *names: str, alpn: list[str] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    """A client's context trusting the test's CA alone (the system's CAs, ~0.1 s of CPU to
    read, play no part)."""
    return ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())


@pytest.fixture
def proxy_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    yield monkeypatch


def wss_adapter(front: TLSFront, client: httpx.AsyncClient, **transport: Any) -> Adapter:
    adapter = metis.build_adapter(
        STACK, api_key="k", base_url=front.url, max_retries=0, http_client=client
    )
    if transport:
        adapter.pipeline.replace("websocket_transport", WebSocketTransport(**transport))
    return adapter


async def a_tool_loop_and_a_turn(adapter: Adapter) -> None:
    async with adapter, session_on(adapter, tools=[get_weather]) as session:
        result = await session.arun("What's the weather in Paris?")
        assert result.reason == "complete" and result.steps == 2
        reply = await session.asend("Thanks")
        assert reply.text == "You said: Thanks"
        assert transport_of(adapter).holds(session.session_id)


@pytest.mark.anyio
async def test_wss_through_the_environments_proxy_verified_against_the_clients_ca(
    emulator: Emulator, ca: trustme.CA, proxy_environment: pytest.MonkeyPatch
) -> None:
    front = TLSFront(emulator, server_context(ca, "127.0.0.1"))
    async with tls_front(front), running(ConnectProxy()) as proxy:
        proxy_environment.setenv("HTTPS_PROXY", proxy.url)
        async with httpx.AsyncClient(verify=client_context(ca)) as client:
            await a_tool_loop_and_a_turn(wss_adapter(front, client))
    assert proxy.targets == [front.authority]  # one CONNECT, every turn in its tunnel
    assert len(front.handshakes) == 1  # one TLS connection, verified against the CA
    sent = turns(emulator)
    assert len(sent) == 3 and len({r.websocket for r in sent}) == 1 and sent[0].websocket
    assert [len(r.json()["input"]) for r in sent] == [1, 1, 1]  # only the new items


@pytest.mark.anyio
async def test_wss_through_the_proxy_option_with_a_ca_file(
    emulator: Emulator, ca: trustme.CA, proxy_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    front = TLSFront(emulator, server_context(ca, "127.0.0.1"))
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    async with tls_front(front), running(ConnectProxy()) as proxy:
        verify = ssl.create_default_context(cafile=str(ca_file))
        async with httpx.AsyncClient(verify=verify) as client:
            await a_tool_loop_and_a_turn(wss_adapter(front, client, proxy=proxy.url))
    assert proxy.targets == [front.authority]
    assert len(turns(emulator)) == 3 and all(r.websocket for r in turns(emulator))


@pytest.mark.anyio
@pytest.mark.parametrize("through_proxy", [True, False], ids=["proxy", "direct"])
@pytest.mark.parametrize(
    ("issuer", "names", "why"),
    [
        ("other", ("127.0.0.1",), "unable to get local issuer certificate"),
        ("same", ("localhost",), "IP address mismatch"),
    ],
    ids=["unknown-ca", "other-name"],
)
async def test_a_certificate_the_client_does_not_trust_is_a_network_error(
    issuer: str,
    names: tuple[str, ...],
    why: str,
    through_proxy: bool,
    emulator: Emulator,
    ca: trustme.CA,
    proxy_environment: pytest.MonkeyPatch,
) -> None:
    signer = ca if issuer == "same" else trustme.CA()
    front = TLSFront(emulator, server_context(signer, *names))
    async with tls_front(front), running(ConnectProxy()) as proxy:
        options = {"proxy": proxy.url if through_proxy else ""}
        async with httpx.AsyncClient(verify=client_context(ca)) as client:
            adapter = wss_adapter(front, client, **options)
            async with adapter, session_on(adapter) as session:
                with pytest.raises(NetworkError, match=r"TLS certificate of .* not trusted") as e:
                    await session.asend("Hello")
                assert session.messages == []
    assert why in str(e.value)
    assert proxy.targets == ([front.authority] if through_proxy else [])
    assert turns(emulator) == []


@pytest.mark.anyio
async def test_an_http2_clients_tls_context_still_opens_the_connection_over_http_1_1(
    emulator: Emulator, ca: trustme.CA, proxy_environment: pytest.MonkeyPatch
) -> None:
    front = TLSFront(emulator, server_context(ca, "127.0.0.1", alpn=["h2", "http/1.1"]))
    context = client_context(ca)
    context.set_alpn_protocols(["http/1.1", "h2"])  # what httpcore sets for an http2 client
    async with tls_front(front), httpx.AsyncClient(verify=context) as client:
        adapter = wss_adapter(front, client)
        async with adapter, session_on(adapter) as session:
            assert (await session.asend("Hello")).text == "You said: Hello"
    assert front.handshakes == ["http/1.1"]
    assert [bool(r.websocket) for r in turns(emulator)] == [True]
