"""The lean HTTP/1.1 transport (metis/transport/http1.py) over real loopback sockets, on
asyncio's own loop and on uvloop (the gateway's): its keep-alive pool, the bodies it reads
and sends, its timeouts and errors as httpx's own, cancellation, TLS, backpressure, and what
it hands to httpx's usual transport."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trustme

from metis.transport.http1 import LeanBody, LeanTransport
from metis.transport.http1_protocol import PAUSE_AT

from ..fault_proxy import (
    CLOSE,
    HANG,
    RESET,
    FaultProxy,
    Notify,
    Pause,
    chunk,
    chunked_head,
    response,
)
from .loops import Runner, lean_client


def pool_of(client: httpx.AsyncClient) -> Any:
    return client._transport._pool  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def proxied(*scripts: list[Any]) -> AsyncIterator[tuple[FaultProxy, httpx.AsyncClient]]:
    async with FaultProxy.running() as proxy, lean_client() as client:
        for steps in scripts:
            proxy.script(*steps)
        yield proxy, client


OK = response(200, b'{"ok":true}')


async def until(check: Callable[[], bool]) -> None:
    """Until ``check()`` holds (what the loop has to deliver first); fails after 5 s."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


# The pool ----------------------------------------------------------------------------


def test_a_connection_read_to_its_end_is_reused(run: Runner) -> None:
    async def main() -> None:
        async with proxied([OK], [OK], [OK]) as (proxy, client):
            for _ in range(3):
                answer = await client.post(proxy.url + "/v1", content=b"{}")
                assert answer.json() == {"ok": True}
            assert proxy.connections == 1
            assert [seen.body for seen in proxy.requests] == [b"{}"] * 3
            assert pool_of(client).idle_count == 1

    run(main())


@pytest.mark.parametrize("who", ["server", "client"])
def test_connection_close_from_either_side_is_not_reused(run: Runner, who: str) -> None:
    async def main() -> None:
        close = {"connection": "close"} if who == "server" else {}
        async with proxied([response(200, b"1", close)], [OK]) as (proxy, client):
            headers = {"connection": "close"} if who == "client" else {}
            await client.get(proxy.url, headers=headers)
            await client.get(proxy.url)
            assert proxy.connections == 2

    run(main())


def test_a_response_closed_before_its_end_closes_its_connection(run: Runner) -> None:
    async def main() -> None:
        first = [chunked_head(), chunk(b"data: 1\n\n"), HANG]
        async with proxied(first, [OK]) as (proxy, client):
            async with client.stream("GET", proxy.url) as answer:
                assert await answer.aiter_raw().__anext__() == b"data: 1\n\n"
            assert pool_of(client).total == 0
            assert (await client.get(proxy.url)).status_code == 200
            assert proxy.connections == 2

    run(main())


def test_an_idle_connection_the_server_closed_is_not_reused(run: Runner) -> None:
    async def main() -> None:
        async with proxied([OK, CLOSE], [OK]) as (proxy, client):
            await client.get(proxy.url)
            await until(lambda: pool_of(client).idle_count == 0)  # the server's close arrives
            assert (await client.get(proxy.url)).status_code == 200
            assert proxy.connections == 2

    run(main())


def test_bytes_past_a_response_end_keep_its_connection_out_of_the_pool(run: Runner) -> None:
    async def main() -> None:
        async with proxied([OK + b"HTTP/1.1 200 X\r\n"], [OK]) as (proxy, client):
            assert (await client.get(proxy.url)).json() == {"ok": True}
            assert (await client.get(proxy.url)).json() == {"ok": True}
            assert proxy.connections == 2

    run(main())


def test_max_connections_makes_a_request_wait_and_the_pool_timeout_ends_the_wait(
    run: Runner,
) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy:
            proxy.script(chunked_head(), chunk(b"a"), HANG)
            proxy.script(OK)
            async with lean_client(max_connections=1) as client:
                async with client.stream("GET", proxy.url) as held:
                    await held.aiter_raw().__anext__()
                    with pytest.raises(httpx.PoolTimeout):
                        await client.get(proxy.url, timeout=httpx.Timeout(5.0, pool=0.05))
                    waiting = asyncio.ensure_future(client.get(proxy.url))
                    await asyncio.sleep(0.05)
                    assert not waiting.done()
                answer = await asyncio.wait_for(waiting, 5)
                assert answer.status_code == 200
                assert pool_of(client).total == 1

    run(main())


def test_the_keep_alive_limit_closes_what_is_released_past_it(run: Runner) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy:
            for _ in range(2):
                proxy.script(chunked_head(), chunk(b"a"), chunk(b""))
            async with lean_client(max_keepalive_connections=1) as client:
                async with (
                    client.stream("GET", proxy.url) as one,
                    client.stream("GET", proxy.url) as two,
                ):
                    await one.aread()
                    await two.aread()
                assert pool_of(client).idle_count == 1
                assert pool_of(client).total == 1

    run(main())


def test_an_idle_connection_expires(run: Runner) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy:
            proxy.script(OK)
            proxy.script(OK)
            async with lean_client(keepalive_expiry=0.05) as client:
                await client.get(proxy.url)
                assert pool_of(client).idle_count == 1
                await asyncio.sleep(0.3)
                assert pool_of(client).idle_count == 0
                assert pool_of(client).total == 0
                await client.get(proxy.url)
            assert proxy.connections == 2

    run(main())


# Bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        response(200, b"x" * 5000),
        chunked_head() + chunk(b"x" * 3000) + chunk(b"x" * 2000) + chunk(b""),
        b"HTTP/1.1 200 X\r\ncontent-type: text/plain\r\n\r\n" + b"x" * 5000,
    ],
    ids=["content-length", "chunked", "until-close"],
)
def test_each_body_framing_is_read_whole(run: Runner, answer: bytes) -> None:
    async def main() -> None:
        steps = [answer, CLOSE] if b"content-length" not in answer.lower() else [answer]
        steps = [answer] if b"chunked" in answer else steps
        async with proxied(steps) as (proxy, client):
            assert (await client.get(proxy.url)).content == b"x" * 5000

    run(main())


def test_what_arrived_together_is_handed_on_joined(run: Runner) -> None:
    async def main() -> None:
        events = [b"data: %d\n\n" % n for n in range(5)]
        arrived = asyncio.Event()
        steps = [chunked_head(), b"".join(chunk(e) for e in events), Notify(arrived), HANG]
        async with proxied(steps) as (proxy, client), client.stream("GET", proxy.url) as answer:
            body = answer.extensions["metis_body"]
            assert isinstance(body, LeanBody)
            await arrived.wait()
            connection = body._connection
            assert connection is not None
            await until(lambda: connection.buffered >= sum(map(len, events)))
            read = body.reader(lambda: 5.0)
            assert await read() == b"".join(events)

    run(main())


def test_a_streamed_request_body_is_sent_chunked(run: Runner) -> None:
    async def main() -> None:
        received = bytearray()
        done = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            received.extend(await reader.readuntil(b"0\r\n\r\n"))
            writer.write(OK)
            done.set()
            await reader.read()

        async def parts() -> AsyncIterator[bytes]:
            yield b"hello "
            yield b""
            yield b"world"

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, lean_client() as client:
            answer = await client.post(f"http://127.0.0.1:{port}/up", content=parts())
            assert answer.status_code == 200
        head, _, body = bytes(received).partition(b"\r\n\r\n")
        assert b"transfer-encoding: chunked" in head.lower()
        assert body == b"6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n"

    run(main())


def test_an_interim_response_is_skipped(run: Runner) -> None:
    async def main() -> None:
        async with proxied([b"HTTP/1.1 100 Continue\r\n\r\n" + OK]) as (proxy, client):
            answer = await client.get(proxy.url)
            assert (answer.status_code, answer.json()) == (200, {"ok": True})

    run(main())


# Timeouts and errors -----------------------------------------------------------------


def test_a_response_that_never_comes_is_a_read_timeout(run: Runner) -> None:
    async def main() -> None:
        async with proxied([HANG]) as (proxy, client):
            with pytest.raises(httpx.ReadTimeout):
                await client.get(proxy.url, timeout=httpx.Timeout(5.0, read=0.05))
            assert pool_of(client).total == 0

    run(main())


def test_a_body_that_stalls_is_a_read_timeout(run: Runner) -> None:
    async def main() -> None:
        async with proxied([chunked_head(), chunk(b"a"), HANG]) as (proxy, client):
            with pytest.raises(httpx.ReadTimeout):
                await client.get(proxy.url, timeout=httpx.Timeout(5.0, read=0.05))

    run(main())


def test_each_read_gets_its_own_time_however_the_last_ones_were_given(run: Runner) -> None:
    async def main() -> None:
        steps = [chunked_head(), Pause(0.2), chunk(b"a"), HANG]
        async with proxied(steps) as (proxy, client), client.stream("GET", proxy.url) as answer:
            seconds = iter([30.0, 0.05])
            read = answer.extensions["metis_body"].reader(lambda: next(seconds))
            assert await read() == b"a"  # after a wait of up to 30 s
            with pytest.raises(httpx.ReadTimeout):  # a shorter time than the standing one
                await asyncio.wait_for(read(), 5)

    run(main())


def test_a_server_that_does_not_read_is_a_write_timeout(run: Runner) -> None:
    async def main() -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:  # never accepted nor read
            url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
            async with lean_client() as client:
                with pytest.raises(httpx.WriteTimeout):
                    await client.post(
                        url, content=b"x" * (64 << 20), timeout=httpx.Timeout(5.0, write=0.2)
                    )
                assert pool_of(client).total == 0

    run(main())


def test_a_refused_connection_is_a_connect_error(run: Runner) -> None:
    async def main() -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        async with lean_client() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")
            assert pool_of(client).total == 0

    run(main())


def test_a_tls_handshake_that_never_ends_is_a_connect_timeout(run: Runner) -> None:
    async def main() -> None:
        async with proxied() as (proxy, client):  # it answers TLS's hello with nothing
            with pytest.raises(httpx.ConnectTimeout):
                url = proxy.url.replace("http:", "https:")
                await client.get(url, timeout=httpx.Timeout(5.0, connect=0.1))

    run(main())


@pytest.mark.parametrize(
    "steps",
    [
        [b"NOT HTTP AT ALL\r\n\r\n"],
        [response(200, b"short", declared_length=100), CLOSE],
        [chunked_head(), chunk(b"a"), CLOSE],
    ],
    ids=["malformed", "short-body", "chunked-cut"],
)
def test_a_malformed_or_cut_response_is_a_remote_protocol_error(
    run: Runner, steps: list[Any]
) -> None:
    async def main() -> None:
        async with proxied(steps) as (proxy, client):
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(proxy.url)
            assert pool_of(client).total == 0

    run(main())


def test_a_reset_is_a_read_error(run: Runner) -> None:
    async def main() -> None:
        async with proxied([chunked_head(), chunk(b"a"), RESET]) as (proxy, client):
            with pytest.raises(httpx.ReadError):
                await client.get(proxy.url)

    run(main())


def test_a_connection_lost_while_sending_is_a_write_error(run: Runner) -> None:
    async def main() -> None:
        async def endless() -> AsyncIterator[bytes]:
            while True:
                yield b"x" * 65536
                await asyncio.sleep(0)

        async with proxied([RESET]) as (proxy, client):
            proxy.script(RESET)
            with pytest.raises((httpx.WriteError, httpx.ReadError)):
                await client.post(proxy.url, content=endless(), headers={"content-length": "0"})
            assert pool_of(client).total == 0

    run(main())


# Cancellation ------------------------------------------------------------------------


def test_a_request_cancelled_leaves_no_connection_in_use(run: Runner) -> None:
    async def main() -> None:
        async with proxied([HANG], [OK]) as (proxy, client):
            sent = asyncio.ensure_future(client.get(proxy.url))
            await until(lambda: bool(proxy.requests))
            sent.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sent
            assert pool_of(client).total == 0
            assert (await client.get(proxy.url)).status_code == 200

    run(main())


def test_a_request_cancelled_while_waiting_for_the_pool_leaves_it_usable(run: Runner) -> None:
    async def main() -> None:
        async with FaultProxy.running() as proxy:
            proxy.script(chunked_head(), chunk(b"a"), chunk(b""))
            proxy.script(OK)
            async with lean_client(max_connections=1) as client:
                async with client.stream("GET", proxy.url) as held:
                    waiting = asyncio.ensure_future(client.get(proxy.url))
                    await asyncio.sleep(0.02)
                    waiting.cancel()
                    await held.aread()
                assert not pool_of(client).waiters
                assert (await client.get(proxy.url)).status_code == 200

    run(main())


def test_abort_ends_a_pending_read_at_once(run: Runner) -> None:
    async def main() -> None:
        async with proxied([chunked_head(), HANG]) as (proxy, client):
            async with client.stream("GET", proxy.url) as answer:
                body = answer.extensions["metis_body"]
                read = body.reader(lambda: 30.0)
                pending = asyncio.ensure_future(read())
                await asyncio.sleep(0.01)
                body.abort()
                with pytest.raises(httpx.ReadError):
                    await asyncio.wait_for(pending, 5)
            assert pool_of(client).total == 0

    run(main())


# TLS ---------------------------------------------------------------------------------


def test_https_with_the_clients_trust_sni_and_alpn(run: Runner) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    server_context.set_alpn_protocols(["h2", "http/1.1"])
    names: list[str | None] = []
    server_context.sni_callback = lambda _s, name, _c: names.append(name)  # type: ignore[assignment,misc]
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)

    async def main() -> None:
        protocols: list[str | None] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            protocols.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
            await reader.readuntil(b"\r\n\r\n")
            writer.write(OK)
            await reader.read()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        async with server:
            transport = LeanTransport(verify=client_context)
            async with httpx.AsyncClient(transport=transport) as client:
                answer = await client.get(f"https://localhost:{port}/")
                assert answer.json() == {"ok": True}
            async with httpx.AsyncClient(transport=LeanTransport()) as untrusting:
                with pytest.raises(httpx.ConnectError):
                    await untrusting.get(f"https://localhost:{port}/")
        assert protocols[0] == "http/1.1"
        assert names[0] == "localhost"

    run(main())


# Backpressure ------------------------------------------------------------------------


def test_a_reader_behind_pauses_the_socket_and_loses_nothing(run: Runner) -> None:
    async def main() -> None:
        size = 4 * PAUSE_AT
        answer_steps = [response(200, b"y" * size)]
        async with (
            proxied(answer_steps) as (proxy, client),
            client.stream("GET", proxy.url) as answer,
        ):
            connection = answer.extensions["metis_body"]._connection
            await until(lambda: connection.reading_paused)
            assert connection.buffered < 2 * PAUSE_AT
            assert await answer.aread() == b"y" * size

    run(main())


# What goes to the usual transport ----------------------------------------------------


def test_a_traced_request_goes_to_the_usual_transport(run: Runner) -> None:
    async def main() -> None:
        seen: list[str] = []

        async def trace(name: str, info: dict[str, Any]) -> None:
            seen.append(name)

        async with proxied([OK]) as (proxy, client):
            answer = await client.get(proxy.url, extensions={"trace": trace})
            assert answer.status_code == 200
            assert "metis_body" not in answer.extensions
            assert seen

    run(main())


def test_trio_goes_to_the_usual_transport() -> None:
    trio = pytest.importorskip("trio")

    async def main() -> None:
        async with FaultProxy.running() as proxy, lean_client() as client:
            proxy.script(OK)
            answer = await client.get(proxy.url)
            assert answer.json() == {"ok": True}
            assert "metis_body" not in answer.extensions

    trio.run(main)


# The client metis makes on it ----------------------------------------------------------


def test_http_client_lean_sends_over_the_lean_transport_without_slots() -> None:
    from metis.transport.clients import sends_over_network
    from metis.transport.slots import slots_of
    from metis.transport.stage import http_client

    client = http_client(10.0, lean=True)
    assert isinstance(client._transport, LeanTransport)
    assert sends_over_network(client)  # (the WebSocket mode's test of a real client)
    assert client._transport.ssl_context.verify_mode == ssl.CERT_REQUIRED

    async def slots(url: str) -> Any:
        return slots_of(client, client.build_request("GET", url))

    # its pool queues without a scan: no slot before it; httpx's own transport, which the
    # lean one hands other schemes (and trio, a proxy, a mocked httpx), has them
    assert asyncio.run(slots("http://127.0.0.1:8/")) is None
    assert asyncio.run(slots("ftp://127.0.0.1:8/")) is not None


def test_http_client_lean_without_httptools_is_httpxs_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from metis.transport.slots import slots_of
    from metis.transport.stage import http_client

    monkeypatch.setitem(sys.modules, "metis.transport.http1", None)  # its import fails
    client = http_client(10.0, lean=True)
    assert isinstance(client._transport, httpx.AsyncHTTPTransport)

    async def slots() -> Any:
        return slots_of(client)

    assert asyncio.run(slots()) is not None
