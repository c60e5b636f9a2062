"""transport: the only IO. Streams the body, reports HTTP failures and network errors, closes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from metis.errors import CancelledError, NetworkError, RedirectError
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, ResponseHead, WireRequest
from metis.transport.stage import Transport

from ..helpers import bound, make_call


class Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes], fail_after: int | None = None) -> None:
        self.chunks = chunks
        self.fail_after = fail_after
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, chunk in enumerate(self.chunks):
            if self.fail_after is not None and i == self.fail_after:
                raise httpx.ReadError("connection reset by peer")
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def client_for(handler: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


async def collect(client: httpx.AsyncClient, wire: WireRequest) -> list[bytes]:
    http = client
    call = make_call()
    items = [item async for item in bound(Transport(), http=http)(wire, call, None)]  # type: ignore[arg-type]
    assert isinstance(items[0], ResponseHead)  # the head first, then only the body's bytes
    assert all(type(item) is bytes for item in items[1:])
    return items[1:]


WIRE = WireRequest(
    url="https://api.example.com/v1/messages",
    body={"model": "m", "text": "héllo"},
    headers={"x-api-key": "sk-secret", "anthropic-version": "2023-06-01"},
    stream=True,
)


@pytest.mark.anyio
async def test_sends_the_wire_request_and_yields_the_body_chunk_by_chunk() -> None:
    seen: list[httpx.Request] = []
    stream = Chunks([b"event: a\n", b"data: {}\n\n"])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, stream=stream)

    chunks = await collect(client_for(handler), WIRE)
    assert chunks == [b"event: a\n", b"data: {}\n\n"]
    assert seen[0].method == "POST" and str(seen[0].url) == WIRE.url
    assert seen[0].headers["x-api-key"] == "sk-secret"
    assert json.loads(seen[0].content) == WIRE.body
    assert stream.closed


@pytest.mark.anyio
async def test_a_non_2xx_answer_is_raised_with_its_status_headers_and_body() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"retry-after": "3"}, json={"error": "slow down"})

    with pytest.raises(HTTPFailure) as caught:
        await collect(client_for(handler), WIRE)
    assert caught.value.status == 429
    assert caught.value.headers["retry-after"] == "3"
    assert json.loads(caught.value.body) == {"error": "slow down"}


@pytest.mark.anyio
async def test_a_huge_error_body_is_cut_at_the_limit() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, stream=Chunks([b"x" * 4096] * 10))

    http = client_for(handler)

    call = make_call()
    with pytest.raises(HTTPFailure) as caught:
        async for _ in bound(Transport(max_error_body_bytes=5000), http=http)(WIRE, call, None):  # type: ignore[arg-type]
            pass
    assert len(caught.value.body) == 5000


@pytest.mark.anyio
async def test_a_connection_failure_is_a_network_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with pytest.raises(NetworkError, match=r"before a response arrived.*connection refused") as e:
        await collect(client_for(handler), WIRE)
    # Where it went, so a wrong base URL shows; never the path or query (a key may be there).
    assert "connection to anthropic at https://api.example.com failed" in str(e.value)


@pytest.mark.anyio
async def test_a_drop_mid_body_is_a_network_error_and_the_response_is_closed() -> None:
    stream = Chunks([b"data: 1\n\n", b"data: 2\n\n"], fail_after=1)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stream)

    received: list[bytes] = []
    http = client_for(handler)
    call = make_call()
    with pytest.raises(NetworkError, match=r"while reading the response"):
        async for chunk in bound(Transport(), http=http)(WIRE, call, None):  # type: ignore[arg-type]
            received.append(chunk)
    assert received == [ResponseHead(200), b"data: 1\n\n"]
    assert stream.closed


@pytest.mark.anyio
async def test_a_timeout_says_it_timed_out() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out")

    with pytest.raises(NetworkError, match=r"timed out"):
        await collect(client_for(handler), WIRE)


@pytest.mark.anyio
async def test_leaving_early_closes_the_response() -> None:
    stream = Chunks([b"a", b"b", b"c"])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stream)

    http = client_for(handler)

    call = make_call()
    iterator = bound(Transport(), http=http)(WIRE, call, None)  # type: ignore[arg-type]
    assert await iterator.__anext__() == ResponseHead(200)
    assert await iterator.__anext__() == b"a"
    await iterator.aclose()  # type: ignore[attr-defined]
    assert stream.closed


@pytest.mark.anyio
async def test_a_cancel_landing_as_the_response_arrives_still_closes_it() -> None:
    # The race trio shows under load: send() has its response and returns without another
    # checkpoint, while another task's cancel() has already been registered.
    stream = Chunks([b"a"])
    http = client_for(lambda request: httpx.Response(200, stream=stream))
    call = make_call()
    send = http.send

    async def send_then_cancelled(request: httpx.Request, **kw: object) -> httpx.Response:
        response = await send(request, **kw)  # type: ignore[arg-type]
        assert call.cancel.cancel()
        return response

    http.send = send_then_cancelled  # type: ignore[method-assign]
    with pytest.raises(CancelledError):
        async for _ in bound(Transport(), http=http)(WIRE, call, None):  # type: ignore[arg-type]
            pass
    assert stream.closed


def test_the_wire_request_repr_hides_keys() -> None:
    assert "sk-secret" not in repr(WIRE)
    assert "[REDACTED]" in repr(WIRE)


class Stalls(httpx.AsyncByteStream):
    """Yields ``chunks``, then waits forever (a peer that fell silent mid-body)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        await anyio.sleep_forever()
        yield b""  # pragma: no cover

    async def aclose(self) -> None:
        self.closed = True


async def drain(transport: Transport, call: Call, wire: WireRequest = WIRE) -> list[bytes]:
    items = [item async for item in transport(wire, call, None)]  # type: ignore[arg-type]
    return [item for item in items if not isinstance(item, ResponseHead)]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_an_error_body_that_stalls_is_bounded_by_the_call_deadline(stream: bool) -> None:
    body = Stalls([b'{"error": '])
    http = client_for(lambda request: httpx.Response(500, stream=body))
    call = make_call()
    call.deadline = anyio.current_time() + 0.05  # in memory, and the body never ends
    with anyio.fail_after(10):
        with pytest.raises(NetworkError, match=r"timeout \(600 s\) ran out"):
            await drain(
                bound(Transport(), http=http), call, dataclasses.replace(WIRE, stream=stream)
            )
    assert anyio.current_time() >= call.deadline
    assert body.closed


@pytest.mark.anyio
async def test_cancel_interrupts_an_error_body_read() -> None:
    body = Stalls([b'{"error": '])
    http = client_for(lambda request: httpx.Response(503, stream=body))
    call = make_call()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_cancel_soon, call)
            with pytest.raises(CancelledError):
                await drain(bound(Transport(), http=http), call)
    assert body.closed


async def _cancel_soon(call: Call) -> None:
    await anyio.wait_all_tasks_blocked()  # the read waits for the rest of the body
    assert call.cancel.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_stall_after_the_first_chunk_ends_after_the_idle_timeout(stream: bool) -> None:
    http = client_for(lambda r: httpx.Response(200, stream=Stalls([b"data"])))
    call = make_call()
    started = anyio.current_time()
    received: list[bytes] = []
    # the first-event timeout is an hour: the bound on a hang comes long before it
    transport = Transport(idle_timeout=0.3, first_event_timeout=3600)
    with anyio.fail_after(60), pytest.raises(NetworkError, match=r"stalled for 0\.3 s"):
        async for chunk in bound(transport, http=http)(
            dataclasses.replace(WIRE, stream=stream),
            call,
            None,  # type: ignore[arg-type]
        ):
            received.append(chunk)
    assert received == [ResponseHead(200), b"data"]
    assert anyio.current_time() - started >= 0.3  # not before the idle timeout


@pytest.mark.anyio
async def test_a_whole_body_whose_first_bytes_never_come_stalls_at_the_idle_timeout() -> None:
    http = client_for(lambda r: httpx.Response(200, stream=Stalls([])))
    call = make_call()
    wire = dataclasses.replace(WIRE, stream=False)
    with anyio.fail_after(10), pytest.raises(NetworkError, match=r"body stalled for 0\.05 s"):
        await drain(bound(Transport(idle_timeout=0.05), http=http), call, wire)


@pytest.mark.anyio
async def test_metis_follows_no_redirect_with_its_own_client() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(302, headers={"location": "/v2/messages"})

    http = client_for(handler)

    call = make_call()
    with pytest.raises(RedirectError, match="does not follow redirects") as caught:
        await drain(bound(Transport(), http=http), call)
    assert caught.value.provider_status == 302 and not caught.value.retryable
    assert len(seen) == 1


@pytest.mark.anyio
async def test_a_following_client_never_takes_the_key_to_another_origin() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(307, headers={"location": "https://evil.example.net/v1/messages"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=True)
    with pytest.raises(RedirectError, match="another origin"):
        await drain(bound(Transport(), http=client), make_call())
    assert [str(r.url) for r in seen] == [WIRE.url]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "identity", None])
@pytest.mark.anyio
async def test_an_encoded_body_is_decoded_and_a_plain_one_passed_on_as_it_came(
    encoding: str | None,
) -> None:
    import zlib

    body = b'data: {"a": 1}\n\n' * 50
    if encoding == "gzip":
        compressor = zlib.compressobj(wbits=31)
        sent = compressor.compress(body) + compressor.flush()
    elif encoding == "deflate":
        sent = zlib.compress(body)
    else:
        sent = body
    parts = [sent[:7], sent[7:100], sent[100:]]
    headers = {"content-encoding": encoding} if encoding else {}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, stream=Chunks(parts))

    chunks = await collect(client_for(handler), WIRE)
    assert b"".join(chunks) == body
    if encoding in (None, "identity"):
        assert chunks == parts  # the response's own chunks, unchanged
