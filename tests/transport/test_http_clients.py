"""The transport behaves the same with an httpx.AsyncClient and an httpx2.AsyncClient: every test
here runs with each client, under asyncio and trio, over real loopback sockets
(tests/fault_proxy.py; respx mocks httpx only). Streaming, status and headers, connection
failures and timeouts classified, the per-read deadlines, cancel, the redirect policy, and the
pool after a short body and after one longer than declared."""

from __future__ import annotations

import importlib
import json
import logging
import socket
import sys
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from pydantic import ValidationError

from metis import AdapterConfig, build_adapter
from metis.adapter.count_tokens import count_tokens
from metis.errors import ErrorClass, NetworkError, RateLimitError, RedirectError, ServerError
from metis.model import MessageComplete, StreamEvent, TextDelta
from metis.model.response import StopKind
from metis.testing.emulator import Emulator
from metis.transport import clients as http_clients
from metis.transport.socket_reads import bound_socket_reads, socket_abort
from metis.transport.stage import Transport

from ..fakes import request
from ..fault_proxy import HANG, RESET, FaultProxy, Notify, chunk, chunked_head, response
from .test_deadlines import ERROR, KEY, REPLY, SLACK, adapter_for, run, sse_reply, stream_events
from .test_deadlines import timed as timed_call

CLIENT_PACKAGES = ["httpx", "httpx2"]

pytestmark = pytest.mark.usefixtures("one_default_httpx2_tls_context")


@pytest.fixture(params=CLIENT_PACKAGES)
def http(request: pytest.FixtureRequest) -> ModuleType:
    """The HTTP client package under test: ``http.AsyncClient`` is the client to inject."""
    return importlib.import_module(request.param)


def texts(events: list[StreamEvent]) -> list[str]:
    return [event.text for event in events if isinstance(event, TextDelta)]


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# Either client is accepted, and nothing else -----------------------------------------------


@pytest.mark.anyio
async def test_the_config_takes_either_async_client(http: ModuleType) -> None:
    async with http.AsyncClient() as client:
        assert AdapterConfig(http_client=client).http_client is client


@pytest.mark.parametrize("wrong", [httpx.Client, dict], ids=["sync-client", "dict"])
def test_anything_else_is_refused_naming_both(wrong: type[Any]) -> None:
    with pytest.raises(ValidationError, match=r"httpx\.AsyncClient or an httpx2\.AsyncClient"):
        AdapterConfig(http_client=wrong())


def test_httpx2_failures_are_counted_only_once_httpx2_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx2

    assert http_clients.http_errors() == (httpx.HTTPError, httpx2.HTTPError)
    monkeypatch.delitem(sys.modules, "httpx2")
    assert http_clients.http_errors(TimeoutError) == (httpx.HTTPError, TimeoutError)
    monkeypatch.setitem(sys.modules, "httpx2", httpx)  # what httpx2.alias_httpx() leaves
    assert http_clients.http_errors() == (httpx.HTTPError,)


@pytest.mark.parametrize("package", CLIENT_PACKAGES)
def test_each_failure_kind_is_recognized_in_both_packages(package: str) -> None:
    http = importlib.import_module(package)
    assert http_clients.is_read_timeout(http.ReadTimeout("x"))
    assert http_clients.is_timeout(http.PoolTimeout("x"))
    assert not http_clients.is_timeout(http.ReadError("x"))
    assert http_clients.is_connect_failure(http.ConnectError("x"))
    assert http_clients.is_connect_failure(http.ConnectTimeout("x"))
    assert not http_clients.is_connect_failure(http.ReadTimeout("x"))


# Streaming, status and headers ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_an_answer_arrives_the_same(http: ModuleType, stream: bool) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(*sse_reply("one ", "two") if stream else [response(200, REPLY)])
        adapter = adapter_for(proxy.url, client=client)
        async with timed_call():
            events = await run(adapter, stream)
        final = events[-1]
        assert isinstance(final, MessageComplete)
        assert final.stop_reason.kind is StopKind.END_TURN
        assert texts(events) == (["one ", "two"] if stream else [])
        assert proxy.requests[0].headers["x-api-key"] == KEY


@pytest.mark.anyio
async def test_an_error_status_with_its_headers_is_classified(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        limited = json.dumps({"type": "error", "error": {"type": "rate_limit_error"}}).encode()
        proxy.script(response(429, limited, {"retry-after": "120"}))
        proxy.script(response(500, ERROR))
        adapter = adapter_for(proxy.url, client=client, timeout_seconds=10.0)
        with pytest.raises(RateLimitError) as caught:
            await run(adapter, stream=True)
        assert caught.value.retry_after_seconds == 120.0
        with pytest.raises(ServerError, match="boom"):
            await run(adapter, stream=False)


# Connection failures and timeouts ------------------------------------------------------------


@pytest.mark.anyio
async def test_a_refused_connection_is_a_network_error(http: ModuleType) -> None:
    async with http.AsyncClient() as client:
        adapter = adapter_for(f"http://127.0.0.1:{closed_port()}", client=client)
        async with timed_call():
            with pytest.raises(NetworkError, match="failed before a response arrived") as caught:
                await run(adapter, stream=True)
        assert caught.value.error_class is ErrorClass.NETWORK
        assert isinstance(caught.value.__cause__, http.ConnectError)


@pytest.mark.anyio
async def test_a_stall_mid_stream_ends_after_the_idle_timeout(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        # what arrives comes in one write: the only silence is the stall's
        proxy.script(b"".join([chunked_head(), *stream_events("kept ", "never")[:3]]), HANG)
        transport = Transport(first_event_timeout=30.0, idle_timeout=0.2)
        adapter = adapter_for(proxy.url, client=client, transport=transport)
        events: list[StreamEvent] = []
        async with timed_call() as elapsed:
            with pytest.raises(NetworkError, match=r"stalled for 0.2 s"):
                async for event in adapter.stream(request("anthropic")):
                    events.append(event)
        assert 0.15 <= elapsed() <= 0.2 + SLACK
        assert texts(events) == ["kept "]


@pytest.mark.anyio
async def test_nothing_arriving_ends_after_the_first_event_timeout(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(chunked_head(), HANG)
        transport = Transport(first_event_timeout=0.25, idle_timeout=30.0)
        adapter = adapter_for(proxy.url, client=client, transport=transport)
        async with timed_call() as elapsed:
            with pytest.raises(NetworkError, match=r"nothing arrived within 0.25 s"):
                await run(adapter, stream=True)
        assert 0.2 <= elapsed() <= 0.25 + SLACK


@pytest.mark.anyio
async def test_an_error_body_that_never_ends_ends_at_the_deadline(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(response(500, ERROR[:10], declared_length=len(ERROR)), HANG)
        adapter = adapter_for(proxy.url, client=client, timeout_seconds=0.5, max_retries=2)
        async with timed_call() as elapsed:
            with pytest.raises(NetworkError, match=r"timeout \(0.5 s\) ran out"):
                await run(adapter, stream=False)
        assert 0.45 <= elapsed() <= 0.5 + SLACK
        assert len(proxy.requests) == 1


@pytest.mark.anyio
async def test_a_reset_mid_stream_keeps_what_arrived(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(chunked_head(), *stream_events("kept ", "lost")[:3], RESET)
        adapter = adapter_for(proxy.url, client=client, max_retries=2)
        events: list[StreamEvent] = []
        with pytest.raises(NetworkError, match="while reading the response"):
            async for event in adapter.stream(request("anthropic")):
                events.append(event)
        assert texts(events) == ["kept "]
        assert len(proxy.requests) == 1


# cancel() -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_cancel_mid_stream_ends_the_read_and_closes_the_response(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        sent = anyio.Event()
        proxy.script(chunked_head(), *stream_events("partial ", "rest")[:3], Notify(sent), HANG)
        proxy.script(*sse_reply("next"))
        adapter = adapter_for(proxy.url, client=client, timeout_seconds=60.0)
        req = request("anthropic")

        async def cancel_once_it_stalls() -> None:
            await sent.wait()
            await anyio.sleep(0.2)
            adapter.cancel(req.request_id)

        async with timed_call() as elapsed, anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_once_it_stalls)
            events = [event async for event in adapter.stream(req)]
        final = events[-1]
        assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.CANCELLED
        assert elapsed() <= 0.2 + SLACK
        assert texts(await run(adapter, stream=True)) == ["next"]
        assert [r.connection for r in proxy.requests] == [1, 2]  # the cut one was not reused


# The pool -------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_whole_answer_hands_its_connection_back_to_the_pool(
    http: ModuleType, stream: bool
) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        for _ in range(3):
            proxy.script(*sse_reply("again") if stream else [response(200, REPLY)])
        adapter = adapter_for(proxy.url, client=client)
        for _ in range(3):
            await run(adapter, stream)
        assert [r.connection for r in proxy.requests] == [1, 1, 1]


@pytest.mark.anyio
@pytest.mark.parametrize("then", [HANG, RESET], ids=["held-open", "reset"])
async def test_after_a_short_body_the_next_call_succeeds(http: ModuleType, then: Any) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient(timeout=30) as client:
        proxy.script(response(200, REPLY[:40], declared_length=len(REPLY)), then)
        proxy.script(response(200, REPLY))  # in one write: no silence between head and body
        transport = Transport(first_event_timeout=1.0, idle_timeout=0.2)
        adapter = adapter_for(proxy.url, client=client, transport=transport)
        async with timed_call():
            with pytest.raises(NetworkError):
                await run(adapter, stream=False)
            events = await run(adapter, stream=False)
        assert isinstance(events[-1], MessageComplete)
        assert [r.connection for r in proxy.requests] == [1, 2]


@pytest.mark.anyio
async def test_after_a_body_longer_than_declared_the_next_call_takes_a_new_connection(
    http: ModuleType,
) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient(timeout=30) as client:
        proxy.script(response(200, REPLY + b"extra", declared_length=len(REPLY)))
        proxy.script(response(200, REPLY))
        adapter = adapter_for(proxy.url, client=client)  # no retries
        async with timed_call():
            for _ in range(2):
                events = await run(adapter, stream=False)
                assert isinstance(events[-1], MessageComplete)
        assert [r.connection for r in proxy.requests] == [1, 2]


# Redirects -----------------------------------------------------------------------------------


def redirect(to: str, status: int = 307) -> bytes:
    return response(status, b"", {"location": to})


@pytest.mark.anyio
async def test_a_client_that_follows_no_redirects_gets_none_followed(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(redirect(f"{proxy.url}/elsewhere", 301))
        adapter = adapter_for(proxy.url, client=client, max_retries=2)
        with pytest.raises(RedirectError, match=r"HTTP 301.*does not follow"):
            await run(adapter, stream=True)
        assert len(proxy.requests) == 1


@pytest.mark.anyio
async def test_a_following_client_gets_same_origin_hops_up_to_its_limit(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(redirect("/moved/v1/messages", 308))
        proxy.script(*sse_reply("moved"))
        for _ in range(5):
            proxy.script(redirect("/v1/messages"))
        async with http.AsyncClient(follow_redirects=True, max_redirects=3) as client:
            adapter = adapter_for(proxy.url, client=client, max_retries=2)
            assert texts(await run(adapter, stream=True)) == ["moved"]
            moved = proxy.requests[1]
            assert moved.target == "/moved/v1/messages" and moved.headers["x-api-key"] == KEY
            with pytest.raises(RedirectError, match=r"more than 3 redirects"):
                await run(adapter, stream=True)
        assert len(proxy.requests) == 2 + 4  # the loop: the request and 3 hops, not retried


@pytest.mark.anyio
async def test_a_following_client_never_takes_the_key_to_another_origin(
    http: ModuleType,
) -> None:
    async with FaultProxy.running() as home, FaultProxy.running() as elsewhere:
        home.script(redirect(f"{elsewhere.url}/steal"))
        async with http.AsyncClient(follow_redirects=True) as client:
            adapter = adapter_for(home.url, client=client, max_retries=2)
            with pytest.raises(RedirectError, match="another origin"):
                await run(adapter, stream=False)
        assert len(home.requests) == 1 and elsewhere.requests == []


# The socket under the client -----------------------------------------------------------------


@pytest.mark.anyio
async def test_each_socket_read_is_bounded_and_abortable(http: ModuleType) -> None:
    async with FaultProxy.running() as proxy, http.AsyncClient(timeout=30) as client:
        proxy.script(chunked_head(), chunk(b"data: first\n\n"), HANG)
        proxy.script(chunked_head(), chunk(b"data: first\n\n"), HANG)
        for expected in (http.ReadTimeout, http.RemoteProtocolError):
            sent = client.build_request("POST", f"{proxy.url}/v1/messages", content=b"{}")
            reply = await client.send(sent, stream=True)
            restore = bound_socket_reads(reply, lambda: 0.3)
            abort = socket_abort(reply)
            assert restore is not None and abort is not None  # no cancel scope per read
            chunks = reply.aiter_bytes()
            assert await anext(chunks) == b"data: first\n\n"
            if expected is http.RemoteProtocolError:
                abort()  # what cancel() does from another task
            with anyio.fail_after(10), pytest.raises(expected):
                await anext(chunks)  # the client's own read timeout is 30 s
            restore()
            await reply.aclose()


# Direct requests outside the transport: the Ollama checks, counting tokens ----------------------


@pytest.mark.anyio
async def test_an_ollama_server_that_is_down_is_named_with_either_client(
    http: ModuleType,
) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}"
    async with http.AsyncClient() as client:
        adapter = build_adapter("ollama", base_url=base_url, http_client=client, max_retries=0)
        with pytest.raises(NetworkError, match="`ollama serve`") as caught:
            await adapter.init()
        assert base_url in caught.value.message
        with pytest.raises(NetworkError, match="`ollama serve`") as caught:
            await adapter.complete(request("ollama", stream=False))
        assert isinstance(caught.value.__cause__, http.ConnectError)


@pytest.mark.anyio
async def test_counting_tokens_at_a_server_that_is_down_is_a_network_error(
    http: ModuleType,
) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}"
    async with http.AsyncClient() as client:
        adapter = build_adapter("anthropic", api_key=KEY, base_url=base_url, http_client=client)
        # The transport's own failure: counting sends the way every request does.
        with pytest.raises(NetworkError, match=r"failed before a response arrived: ConnectError"):
            await count_tokens(adapter, request("anthropic"), estimate_on_error=False)
        counted = await count_tokens(adapter, request("anthropic"))
        assert counted.source == "estimate" and "ConnectError" in counted.detail


# The request line each client logs -----------------------------------------------------------


@pytest.mark.anyio
async def test_the_request_line_either_client_logs_hides_a_query_key(
    http: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-query-0123456789abcdef"
    caplog.set_level(logging.INFO, logger=http.__name__)  # httpx2 logs as "httpx2"
    async with FaultProxy.running() as proxy, http.AsyncClient() as client:
        proxy.script(response(200, REPLY))
        adapter = adapter_for(f"{proxy.url}?key={secret}", client=client)
        await run(adapter, stream=False)
    assert secret in proxy.requests[0].target  # it was sent, as the base URL says
    lines = [r.getMessage() for r in caplog.records if r.name == http.__name__]
    assert any(line.startswith("HTTP Request: POST") for line in lines), lines
    assert not any(secret in line for line in lines), lines


# Chaos: many calls with injected faults, with an httpx2 client -------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_chaos_run_holds_with_an_httpx2_client(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch, no_backoff: Any
) -> None:
    """tests/conformance/test_chaos.py's bounded run (200 calls, ~20% faults, all providers),
    each adapter sending with an httpx2 client: every call completes or fails with its fault's
    class, none hangs, and no connection is left checked out of a pool."""
    import httpx2

    from ..conformance import test_chaos as chaos

    clients: list[Any] = []

    def with_httpx2_client(stack: str, config: AdapterConfig, **kwargs: Any) -> Any:
        clients.append(httpx2.AsyncClient())
        return build_adapter(
            stack, config.model_copy(update={"http_client": clients[-1]}), **kwargs
        )

    monkeypatch.setattr(chaos, "build_adapter", with_httpx2_client)
    try:
        figures = await chaos.run_chaos(200, anyio_backend, seed=2, waits=no_backoff)
    finally:
        for client in clients:
            await client.aclose()
    assert len(clients) == len(chaos.PROVIDERS)
    chaos.check(figures)


# Cancellation races, with an httpx2 client ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["other_task", "consumer_cancel", "consumer_scope"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_cancelling_at_every_point_holds_with_an_httpx2_client(
    provider: str, mode: str, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/pipeline/test_cancellation_races.py's cancel before sending, while connecting,
    after each event and after the end, from another task, the consumer or its cancel scope, with an
    httpx2 client: no exception but CancelledError, and the connection back in the pool."""
    import httpx2

    from ..pipeline import test_cancellation_races as races

    built: list[Any] = []
    async with httpx2.AsyncClient() as client:

        def with_httpx2_client(stack: str, config: AdapterConfig, **kwargs: Any) -> Any:
            built.append(stack)
            return build_adapter(stack, config.model_copy(update={"http_client": client}), **kwargs)

        monkeypatch.setattr(races, "build_adapter", with_httpx2_client)
        await races.test_cancel_at_every_point(provider, mode, emulator)
    assert built == [provider]
