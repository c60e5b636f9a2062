"""What a caller can get wrong, or cut short, around a call: an adapter used after its
``aclose()``, an injected client its owner closed, ``aclose`` twice, a cancel while the retry
waits, many calls at once on one adapter. Each ends in a classified error or the documented
ending, and leaves no connection pool behind."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import httpx
import pytest

from metis.adapter import Adapter
from metis.errors import AdapterError, ClosedError
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    StopKind,
    StreamEvent,
    TextDelta,
)
from metis.testing.emulator import Emulator

from ..conftest import Waits
from ..stack_table import MODELS, adapter

pytestmark = pytest.mark.anyio


def request_for(stack: str, text: str = "Say hello") -> CanonicalRequest:
    model = MODELS[stack].split(":", 1)[1]
    return CanonicalRequest(model=model, messages=[Message.user(text)], max_output_tokens=50)


async def test_a_call_after_aclose_is_a_closed_error_and_opens_no_new_pool(
    emulator: Emulator,
) -> None:
    # It made a new connection pool, which nothing closed again (a ResourceWarning at exit).
    built = adapter("anthropic", emulator)
    assert (await built.complete(request_for("anthropic"))).text == "You said: Say hello"
    await built.aclose()
    await built.aclose()  # a second aclose does nothing
    served = emulator.requests_served
    with pytest.raises(ClosedError, match="was closed") as caught:
        await built.complete(request_for("anthropic"))
    assert not caught.value.retryable
    with pytest.raises(ClosedError):
        await anext(aiter(built.stream(request_for("anthropic"))))
    assert emulator.requests_served == served
    assert not built._own_clients.any_open()


@pytest.mark.parametrize("stack", ["anthropic", "gemini", "bedrock"])
async def test_a_call_through_a_client_its_owner_closed_is_a_closed_error(
    emulator: Emulator, stack: str
) -> None:
    # httpx's bare RuntimeError ("the client has been closed") came out of the call.
    client = httpx.AsyncClient()
    built = adapter(stack, emulator, http_client=client, max_retries=2)
    await client.aclose()
    with pytest.raises(ClosedError, match="HTTP client the adapter was given is closed"):
        await built.complete(request_for(stack))
    assert emulator.requests_served == 0
    await built.aclose()


async def test_a_cancel_while_the_retry_waits_ends_the_call_cancelled(
    emulator: Emulator,
) -> None:
    emulator.push_fault("rate_limit=30", times=5)
    built = adapter("anthropic", emulator, max_retries=3)
    request = request_for("anthropic")
    stops: list[StopKind] = []

    async def call() -> None:
        stops.append((await built.complete(request)).stop_reason.kind)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            while emulator.requests_served < 1:  # noqa: ASYNC110 (a counter, not an event)
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)  # into the 30 s wait
            assert built.cancel(request.request_id)
    assert stops == [StopKind.CANCELLED]
    assert emulator.requests_served == 1
    await built.aclose()


async def test_many_concurrent_calls_on_one_adapter_each_get_their_own_reply(
    emulator: Emulator, no_backoff: Waits
) -> None:
    emulator.push_fault("overloaded", times=10)
    built = adapter("openai", emulator, max_retries=3)
    texts: dict[int, str] = {}

    async def call(i: int) -> None:
        try:
            texts[i] = (await built.complete(request_for("openai", f"n{i}"))).text
        except AdapterError as error:  # a call whose every attempt met a fault
            texts[i] = error.error_class.value

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for i in range(30):
                group.start_soon(call, i)
    for i, text in texts.items():
        assert text in (f"You said: n{i}", "overloaded")
    # Every fault but the last of each call that met four (one attempt and three retries) is
    # followed by a retry's wait: which calls meet the faults is the scheduler's.
    exhausted = sum(text == "overloaded" for text in texts.values())
    assert len(texts) == 30 and len(no_backoff) == 10 - exhausted
    await built.aclose()


async def test_an_embedding_call_after_aclose_is_a_closed_error(emulator: Emulator) -> None:
    from metis import build_embedder

    built = build_embedder("openai", api_key="k", base_url=emulator.url + "/v1")
    result = await built.embed(["one"], model="text-embedding-3-small", dimensions=4)
    assert len(result.vectors) == 1
    await built.aclose()
    await built.aclose()
    with pytest.raises(ClosedError, match="embedder was closed"):
        await built.embed(["two"], model="text-embedding-3-small", dimensions=4)
    assert emulator.requests_served == 1
    assert not built._own_clients.any_open()


async def _closed_midway(built: Adapter, close: Callable[[], Awaitable[None]]) -> None:
    """A stream in flight whose HTTP client ``close`` closes after its first text."""
    request = request_for("anthropic", "tell me a long story " * 5)
    events: list[StreamEvent] = []
    with anyio.fail_after(10), pytest.raises(ClosedError, match="closed while") as caught:
        async for event in built.stream(request):
            events.append(event)
            if isinstance(event, TextDelta) and len(events) < 4:
                await close()
    assert not caught.value.retryable
    assert any(isinstance(event, TextDelta) for event in events)
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR


async def test_a_stream_whose_given_client_is_closed_midway_is_a_closed_error(
    emulator: Emulator,
) -> None:
    # It was a NetworkError ('connection failed while reading the response: ReadError'),
    # retryable, as if the network had failed.
    emulator.push_fault("slow=0.02")
    client = httpx.AsyncClient()
    built = adapter("anthropic", emulator, http_client=client, max_retries=2)
    await _closed_midway(built, client.aclose)
    assert emulator.requests_served == 1
    await built.aclose()


async def test_a_stream_in_flight_when_its_adapter_is_closed_ends_classified(
    emulator: Emulator, anyio_backend: str
) -> None:
    # On trio (httpx's transport closes the connections in use) the stream failed as a
    # retryable NetworkError; on asyncio the lean transport lets it finish on its connection.
    emulator.push_fault("slow=0.02")
    built = adapter("anthropic", emulator, max_retries=2)
    if anyio_backend == "trio":
        await _closed_midway(built, built.aclose)
    else:
        request = request_for("anthropic", "tell me a long story " * 5)
        events = [event async for event in _closing(built, request)]
        final = events[-1]
        assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.END_TURN
    assert emulator.requests_served == 1
    assert not built._own_clients.any_open()


async def _closing(built: Adapter, request: CanonicalRequest) -> AsyncIterator[StreamEvent]:
    closed = False
    async for event in built.stream(request):
        if isinstance(event, TextDelta) and not closed:
            closed = True
            await built.aclose()
        yield event


class ClosedWhileSending(httpx.AsyncHTTPTransport):
    """httpx's transport, whose client is closed as a request reaches it: the race of a call
    with ``aclose()`` (or a given client's owner closing it), made certain."""

    client: httpx.AsyncClient

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await self.client.aclose()
        return await super().handle_async_request(request)


async def test_a_call_whose_client_closes_as_it_sends_leaves_no_socket_open(
    emulator: Emulator,
) -> None:
    # httpcore's closed pool took the request and kept its connection, idle and open, for
    # good: nothing would ever close it (a ResourceWarning when the garbage collector did).
    transport = ClosedWhileSending()
    transport.client = httpx.AsyncClient(transport=transport)
    built = adapter("anthropic", emulator, http_client=transport.client, max_retries=0)
    with anyio.fail_after(10):
        reply = await built.complete(request_for("anthropic"))
    assert reply.text == "You said: Say hello"  # what had been asked was answered
    assert transport.client.is_closed
    connections = transport._pool.connections
    assert connections == [] or all(connection.is_closed() for connection in connections)
    await built.aclose()
