"""Deadlines, cancellation and connections over real sockets (tests/fault_proxy.py), under
asyncio and trio. Each test bounds how long the call takes to end, with generous slack: that
is the behaviour under test. Each also runs under ``anyio.fail_after``, so a hang fails it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.errors import (
    ErrorClass,
    NetworkError,
    RateLimitError,
    RedirectError,
    ServerError,
)
from metis.model import MessageComplete, StreamEvent, TextDelta
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator
from metis.transport.stage import Transport

from ..fakes import anthropic_end, anthropic_start, anthropic_text, request, sse
from ..fault_proxy import (
    CLOSE,
    FORWARD,
    HANG,
    RESET,
    FaultProxy,
    Forward,
    Notify,
    Pause,
    Trickle,
    chunk,
    chunked_head,
    response,
)

KEY = "sk-ant-test-0123456789abcdef"
HARD_LIMIT = 20.0  # no test here may take this long: a hang fails instead of stalling the run
SLACK = 2.5  # seconds a call may end after its bound, on a loaded 2-core machine (1.55 seen)

REPLY = json.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "fine"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
).encode()
ERROR = json.dumps({"type": "error", "error": {"type": "api_error", "message": "boom"}}).encode()


def stream_events(*pieces: str) -> list[bytes]:
    events = sse(anthropic_start(), *anthropic_text(*pieces), *anthropic_end())
    return [chunk(event.encode()) for event in events]


def sse_reply(*pieces: str) -> list[bytes]:
    return [chunked_head(), *stream_events(*pieces), chunk(b"")]


def adapter_for(
    url: str,
    *,
    provider: str = "anthropic",
    client: httpx.AsyncClient | None = None,
    transport: Transport | None = None,
    **config: Any,
) -> Adapter:
    config.setdefault("max_retries", 0)
    adapter = build_adapter(
        provider,
        AdapterConfig(api_key=KEY, base_url=url, http_client=client, **config),
        tool_id_store=InMemoryToolIdStore(),
    )
    if transport is not None:
        adapter.pipeline.replace("transport", transport)
    return adapter


@asynccontextmanager
async def timed() -> AsyncIterator[Callable[[], float]]:
    """The seconds since entering, as a function; fails the test past HARD_LIMIT."""
    with anyio.fail_after(HARD_LIMIT):
        started = anyio.current_time()
        yield lambda: anyio.current_time() - started


async def run(adapter: Adapter, stream: bool) -> list[StreamEvent]:
    """The call's events (complete(): its one message.complete); raises the call's error."""
    if not stream:
        result = await adapter.complete(request(adapter.name, stream=False))
        return [MessageComplete(result.content, result.stop_reason, result.usage)]
    return [event async for event in adapter.stream(request(adapter.name))]


@pytest.fixture(scope="module")
def emulator_server() -> Iterator[Emulator]:
    """The emulator serving any model name: these tests' requests name model ``m``."""
    with Emulator(models="any") as server:
        yield server


# 1. Every read of every body is bounded, and cancel() interrupts it ------------------------


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize(
    "body",
    [
        [response(500, ERROR[:10], declared_length=len(ERROR)), HANG],
        [response(500, declared_length=400, head_only=True), Trickle(b"x" * 400, every=0.05)],
    ],
    ids=["never-arrives", "trickles"],
)
async def test_an_error_body_that_never_ends_ends_at_the_deadline(
    stream: bool, body: list[Any]
) -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(*body)
        adapter = adapter_for(proxy.url, timeout_seconds=1.0, max_retries=2)
        async with timed() as elapsed:
            with pytest.raises(NetworkError, match=r"timeout \(1 s\) ran out"):
                await run(adapter, stream)
        assert 0.9 <= elapsed() <= 1.0 + SLACK
        assert len(proxy.requests) == 1  # no time was left for another attempt
        await adapter.aclose()


@pytest.mark.anyio
async def test_a_whole_body_that_stalls_ends_at_the_idle_timeout() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(response(200, REPLY[:20], declared_length=len(REPLY)), HANG)  # one write
        transport = Transport(idle_timeout=0.2, first_event_timeout=0.2)
        adapter = adapter_for(proxy.url, transport=transport, timeout_seconds=15.0)
        async with timed() as elapsed:
            with pytest.raises(NetworkError, match=r"stalled for 0.2 s"):
                await adapter.complete(request("anthropic", stream=False))
        assert 0.15 <= elapsed() <= 0.2 + SLACK
        await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_cancel_interrupts_an_error_body_that_never_ends(stream: bool) -> None:
    async with FaultProxy.running() as proxy:
        sent = anyio.Event()
        proxy.script(response(503, ERROR[:10], declared_length=len(ERROR)), Notify(sent), HANG)
        adapter = adapter_for(proxy.url, timeout_seconds=60.0)
        req = request("anthropic", stream=stream)
        cancelled: list[bool] = []

        async def cancel_once_the_head_is_in() -> None:
            await sent.wait()
            await anyio.sleep(0.2)  # the head and the first bytes are read; the rest never come
            cancelled.append(adapter.cancel(req.request_id))

        async with timed() as elapsed, anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_once_the_head_is_in)
            if stream:
                events = [event async for event in adapter.stream(req)]
                final = events[-1]
                assert isinstance(final, MessageComplete)
                assert final.stop_reason.kind is StopKind.CANCELLED
            else:
                result = await adapter.complete(req)
                assert result.stop_reason.kind is StopKind.CANCELLED
        assert cancelled == [True]
        assert elapsed() <= 0.2 + SLACK
        await adapter.aclose()


# 2. timeout_seconds bounds the whole call: attempts, backoff, Retry-After -----------------


@pytest.mark.anyio
async def test_the_deadline_bounds_all_attempts_and_their_backoff(no_backoff: list[float]) -> None:
    async with FaultProxy.running() as proxy:
        for _ in range(6):
            proxy.script(response(500, ERROR))
        # Backoff is 1-1.25 s, then 2-2.5 s: the second wait would end past the deadline.
        adapter = adapter_for(proxy.url, timeout_seconds=2.0, max_retries=5)
        async with timed():
            with pytest.raises(ServerError, match="boom"):
                await run(adapter, stream=True)
        assert len(proxy.requests) == 2
        assert len(no_backoff) == 1 and 1.0 <= no_backoff[0] <= 1.25  # not the second wait
        await adapter.aclose()


@pytest.mark.anyio
async def test_an_attempt_that_hangs_ends_at_the_deadline_and_is_not_retried() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(HANG)
        adapter = adapter_for(proxy.url, timeout_seconds=0.5, max_retries=3)
        async with timed() as elapsed:
            with pytest.raises(NetworkError, match=r"timeout \(0.5 s\) ran out"):
                await run(adapter, stream=False)
        assert 0.45 <= elapsed() <= 0.5 + SLACK
        assert len(proxy.requests) == 1
        await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("retry_after", ["30", "120"])
async def test_a_retry_after_past_the_deadline_ends_the_call_at_once(retry_after: str) -> None:
    async with FaultProxy.running() as proxy:
        body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "x"}})
        proxy.script(response(429, body.encode(), {"retry-after": retry_after}))
        adapter = adapter_for(proxy.url, timeout_seconds=10.0, max_retries=2)
        async with timed() as elapsed:
            with pytest.raises(RateLimitError) as caught:
                await run(adapter, stream=True)
        assert caught.value.retry_after_seconds == float(retry_after)
        assert len(proxy.requests) == 1
        assert elapsed() <= SLACK
        await adapter.aclose()


@pytest.mark.anyio
async def test_a_retry_after_within_the_deadline_is_waited_for() -> None:
    async with FaultProxy.running() as proxy:
        body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "x"}})
        proxy.script(response(429, body.encode(), {"retry-after-ms": "300"}))
        proxy.script(*sse_reply("after the wait"))
        adapter = adapter_for(proxy.url, timeout_seconds=10.0, max_retries=2)
        async with timed() as elapsed:
            events = await run(adapter, stream=True)
        assert [e.text for e in events if isinstance(e, TextDelta)] == ["after the wait"]
        assert 0.3 <= elapsed() <= 0.3 + SLACK
        await adapter.aclose()


# 3. The idle timeout is exact on a real socket ---------------------------------------------


@pytest.mark.anyio
async def test_a_stall_after_the_first_event_ends_after_the_idle_timeout() -> None:
    async with FaultProxy.running() as proxy:
        # what arrives comes in one write: the only silence is the stall's
        proxy.script(b"".join([chunked_head(), *stream_events("partial ", "text")[:3]]), HANG)
        transport = Transport(first_event_timeout=30.0, idle_timeout=0.2)
        adapter = adapter_for(proxy.url, transport=transport, timeout_seconds=60.0)
        events: list[StreamEvent] = []
        async with timed() as elapsed:
            with pytest.raises(NetworkError, match=r"stalled for 0.2 s"):
                async for event in adapter.stream(request("anthropic")):
                    events.append(event)
        assert 0.15 <= elapsed() <= 0.2 + SLACK
        final = events[-1]
        assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
        assert final.final_content[0].text == "partial "  # type: ignore[union-attr]
        await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("after_head", [True, False], ids=["head-then-silence", "silence"])
async def test_nothing_arriving_ends_after_the_first_event_timeout(after_head: bool) -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(*([chunked_head()] if after_head else []), HANG)
        transport = Transport(first_event_timeout=0.25, idle_timeout=30.0)
        adapter = adapter_for(proxy.url, transport=transport, timeout_seconds=60.0)
        async with timed() as elapsed:
            with pytest.raises(NetworkError, match=r"nothing arrived within 0.25 s"):
                await run(adapter, stream=True)
        assert 0.2 <= elapsed() <= 0.25 + SLACK
        await adapter.aclose()


@pytest.mark.anyio
async def test_a_slow_but_steady_stream_is_not_cut_by_the_idle_timeout() -> None:
    async with FaultProxy.running() as proxy:
        paced = [step for event in stream_events("a", "b", "c") for step in (event, Pause(0.1))]
        proxy.script(chunked_head(), *paced, chunk(b""))
        transport = Transport(first_event_timeout=0.5, idle_timeout=0.5)
        adapter = adapter_for(proxy.url, transport=transport, timeout_seconds=60.0)
        async with timed():
            events = await run(adapter, stream=True)
        assert [e.text for e in events if isinstance(e, TextDelta)] == ["a", "b", "c"]
        await adapter.aclose()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
async def test_a_provider_stream_cut_silent_midway_ends_after_the_idle_timeout(
    provider: str, emulator: Emulator
) -> None:
    async with FaultProxy.running(upstream=(emulator.host, emulator.port)) as proxy:
        relayed = anyio.Event()
        proxy.script(FORWARD, Notify(relayed))  # the whole stream, as the emulator sends it
        transport = Transport(first_event_timeout=30.0, idle_timeout=0.5)
        adapter = adapter_for(proxy.url, provider=provider, transport=transport)
        async with timed() as elapsed:
            whole = await run(adapter, stream=True)
            await relayed.wait()
            # The same answer again, cut silent after nine tenths of it.
            proxy.script(Forward(stall_after=proxy.relayed[0] * 9 // 10))
            started = elapsed()
            events: list[StreamEvent] = []
            with pytest.raises(NetworkError, match=r"stalled for 0.5 s"):
                async for event in adapter.stream(request(provider)):
                    events.append(event)
        assert isinstance(whole[-1], MessageComplete)
        assert whole[-1].stop_reason.kind is not StopKind.ERROR
        assert 0.4 <= elapsed() - started <= 0.5 + SLACK
        final = events[-1]
        assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
        await adapter.aclose()


# 4. cancel() is False once message.complete has been delivered ----------------------------


@pytest.mark.anyio
async def test_cancel_after_message_complete_returns_false() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(*sse_reply("done"))
        adapter = adapter_for(proxy.url)
        req = request("anthropic")
        answers = []
        async with timed():
            async for event in adapter.stream(req):
                if isinstance(event, MessageComplete):
                    answers.append(adapter.cancel(req.request_id))
        assert answers == [False]
        assert event.stop_reason.kind is StopKind.END_TURN
        await adapter.aclose()


# 5. A connection that a broken response left unusable is never reused ----------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("then", [CLOSE, HANG, RESET], ids=["closed", "held-open", "reset"])
async def test_after_a_short_body_the_next_call_succeeds(stream: bool, then: Any) -> None:
    async with FaultProxy.running() as proxy:
        if stream:
            head = response(200, head_only=True, declared_length=5000)
            body = "".join(sse(anthropic_start(), *anthropic_text("cut")[:2])).encode()
            first = [head.replace(b"application/json", b"text/event-stream"), body, then]
            proxy.script(*first)
            proxy.script(b"".join(sse_reply("second")))  # in one write: no silence in it
        else:
            proxy.script(response(200, REPLY[:40], declared_length=len(REPLY)), then)
            proxy.script(response(200, REPLY))
        transport = Transport(first_event_timeout=1.0, idle_timeout=0.2)
        adapter = adapter_for(proxy.url, transport=transport, timeout_seconds=10.0)
        async with timed():
            with pytest.raises(NetworkError):
                await run(adapter, stream)
            events = await run(adapter, stream)
        assert isinstance(events[-1], MessageComplete)
        assert events[-1].stop_reason.kind is StopKind.END_TURN
        assert [r.connection for r in proxy.requests] == [1, 2]
        await adapter.aclose()


@pytest.mark.anyio
async def test_after_a_body_longer_than_declared_the_next_call_needs_no_retry(
    no_backoff: list[float],
) -> None:
    async with FaultProxy.running() as proxy:
        # The extra bytes in the same read as the body (left in h11's buffer), then in a
        # later one (left in the socket, or the asyncio stream's buffer).
        proxy.script(response(200, REPLY + b"extra bytes", declared_length=len(REPLY)))
        sent = anyio.Event()
        proxy.script(response(200, REPLY), Pause(0.05), b"extra", Notify(sent))
        proxy.script(response(200, REPLY))
        adapter = adapter_for(proxy.url, timeout_seconds=10.0, max_retries=2)
        async with timed():
            for _ in range(3):
                events = await run(adapter, stream=False)
                assert isinstance(events[-1], MessageComplete)
                if len(proxy.requests) == 2:
                    await sent.wait()
        assert [r.connection for r in proxy.requests] == [1, 2, 3]  # new connections, no retry
        await adapter.aclose()


@pytest.mark.anyio
async def test_a_reset_mid_stream_keeps_what_arrived() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(chunked_head(), *stream_events("kept ", "lost")[:3], Pause(0.05), RESET)
        adapter = adapter_for(proxy.url, timeout_seconds=10.0, max_retries=2)
        events: list[StreamEvent] = []
        async with timed():
            with pytest.raises(NetworkError):
                async for event in adapter.stream(request("anthropic")):
                    events.append(event)
        final = events[-1]
        assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
        assert final.final_content[0].text == "kept "  # type: ignore[union-attr]
        assert len(proxy.requests) == 1  # an event had reached the caller: not retried
        await adapter.aclose()


# 6 and 11. Redirects: never followed in a loop, never to another origin with the key -------


def redirect(to: str, status: int = 307) -> bytes:
    return response(status, b"", {"location": to})


@pytest.mark.anyio
async def test_metis_own_client_follows_no_redirect() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(redirect(f"{proxy.url}/elsewhere", 301))
        adapter = adapter_for(proxy.url, max_retries=2)
        async with timed():
            with pytest.raises(RedirectError, match=r"HTTP 301.*does not follow") as caught:
                await run(adapter, stream=True)
        assert caught.value.error_class is ErrorClass.OTHER and not caught.value.retryable
        assert len(proxy.requests) == 1
        await adapter.aclose()


@pytest.mark.anyio
async def test_a_redirect_loop_is_classified_and_not_retried() -> None:
    async with FaultProxy.running() as proxy:
        for _ in range(20):
            proxy.script(redirect("/v1/messages"))
        client = httpx.AsyncClient(follow_redirects=True, max_redirects=3)
        adapter = adapter_for(proxy.url, client=client, max_retries=2)
        async with timed():
            with pytest.raises(RedirectError, match=r"more than 3 redirects") as caught:
                await run(adapter, stream=True)
        assert not caught.value.retryable
        assert len(proxy.requests) == 4  # the request and 3 redirects, once: no retry
        await client.aclose()


@pytest.mark.anyio
async def test_a_same_origin_redirect_is_followed_by_a_following_client() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(redirect("/moved/v1/messages", 308))
        proxy.script(*sse_reply("moved"))
        client = httpx.AsyncClient(follow_redirects=True)
        adapter = adapter_for(proxy.url, client=client)
        async with timed():
            events = await run(adapter, stream=True)
        assert [e.text for e in events if isinstance(e, TextDelta)] == ["moved"]
        moved = proxy.requests[1]
        assert moved.target == "/moved/v1/messages" and moved.method == "POST"
        assert moved.headers["x-api-key"] == KEY
        assert json.loads(moved.body) == json.loads(proxy.requests[0].body)
        await client.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "key_header"),
    [("anthropic", "x-api-key"), ("openai", "authorization"), ("gemini", "x-goog-api-key")],
)
async def test_a_cross_origin_redirect_never_carries_the_key(
    provider: str, key_header: str
) -> None:
    async with FaultProxy.running() as home, FaultProxy.running() as elsewhere:
        home.script(redirect(f"{elsewhere.url}/steal"))
        client = httpx.AsyncClient(follow_redirects=True)
        adapter = adapter_for(home.url, provider=provider, client=client, max_retries=2)
        async with timed():
            with pytest.raises(RedirectError, match="another origin") as caught:
                await run(adapter, stream=False)
        assert KEY not in str(caught.value)
        assert key_header in home.requests[0].headers  # the provider's own host got the key
        assert len(home.requests) == 1  # refused, and not retried
        assert elsewhere.requests == []  # the other host got nothing at all
        await client.aclose()
