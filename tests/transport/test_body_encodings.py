"""Bodies whose Content-Encoding is wrong, over real sockets (tests/fault_proxy.py), under
asyncio and trio: a body that does not decode as its encoding says is the server's own bytes,
a ProtocolError that keeps what arrived and is not sent again; a valid encoded body reads as
the plain one."""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from metis.errors import ProtocolError, ServerError
from metis.model import MessageComplete, StopKind, TextDelta

from ..fakes import request
from ..fault_proxy import FaultProxy, chunk, chunked_head, response
from .test_deadlines import REPLY, adapter_for, run, stream_events

pytestmark = pytest.mark.anyio
GZIP = {"content-encoding": "gzip"}


def sse_body() -> bytes:
    """The SSE events of a reply, unchunked."""
    events = []
    for piece in stream_events("hello ", "world"):
        size, _, rest = piece.partition(b"\r\n")
        events.append(rest[: int(size, 16)])
    return b"".join(events)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_body_that_is_not_its_encoding_is_a_protocol_error_sent_once(stream: bool):
    # It was a NetworkError ("connection failed while reading"), retried: the server sends
    # the same bytes again.
    async with FaultProxy.running() as proxy:
        for _ in range(3):
            proxy.script(response(200, b"this is not gzip", GZIP))
        built = adapter_for(proxy.url, max_retries=2)
        with anyio.fail_after(10), pytest.raises(ProtocolError, match="does not decode"):
            await run(built, stream)
        await built.aclose()
        assert len(proxy.requests) == 1


async def test_a_stream_whose_encoding_breaks_midway_keeps_what_arrived() -> None:
    head = sse_body()[:-40]
    compressor = zlib.compressobj(wbits=31)  # gzip
    good = compressor.compress(head) + compressor.flush(zlib.Z_SYNC_FLUSH)
    headers = {"content-type": "text/event-stream", **GZIP}
    async with FaultProxy.running() as proxy:
        proxy.script(chunked_head(headers=headers), chunk(good), chunk(b"\xff" * 64), chunk(b""))
        built = adapter_for(proxy.url, max_retries=2)
        events = []
        with anyio.fail_after(10), pytest.raises(ProtocolError, match="does not decode"):
            async for event in built.stream(request("anthropic")):
                events.append(event)
        await built.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello world"
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind is StopKind.ERROR
    assert len(proxy.requests) == 1


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_compressed_body_cut_short_says_so_and_keeps_what_arrived(
    encoding: str, stream: bool
) -> None:
    # Its framing was whole (a Content-Length of the cut bytes): the decoder's last flush took
    # the cut for the end, and the call failed on the cut JSON ("provider sent invalid JSON").
    plain = sse_body() if stream else REPLY
    packed = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    kind = "text/event-stream" if stream else "application/json"
    async with FaultProxy.running() as proxy:
        proxy.script(
            response(
                200,
                packed[: len(packed) // 2],
                {"content-encoding": encoding, "content-type": kind},
            )
        )
        built = adapter_for(proxy.url, max_retries=2)
        events: list[object] = []
        with anyio.fail_after(10), pytest.raises(ProtocolError, match="cut short"):
            if stream:
                async for event in built.stream(request("anthropic")):
                    events.append(event)
            else:
                await run(built, stream)
        await built.aclose()
    assert len(proxy.requests) == 1
    if stream:
        assert isinstance(events[-1], MessageComplete)
        assert events[-1].stop_reason.kind is StopKind.ERROR
        assert "hello world".startswith("".join(e.text for e in events if isinstance(e, TextDelta)))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_compressed_body_cut_in_its_checksum(stream: bool) -> None:
    # Every byte of the reply decoded, gzip's CRC and length never came. A whole reply is not
    # taken unchecked (it passed); a stream whose message had ended keeps it, the error after
    # its end logged, as any error after a message's end is.
    plain = sse_body() if stream else REPLY
    kind = "text/event-stream" if stream else "application/json"
    async with FaultProxy.running() as proxy:
        proxy.script(response(200, gzip.compress(plain)[:-3], {**GZIP, "content-type": kind}))
        built = adapter_for(proxy.url, max_retries=2)
        with anyio.fail_after(10):
            if stream:
                events = await run(built, stream)
                assert isinstance(events[-1], MessageComplete)
                assert events[-1].stop_reason.kind is StopKind.END_TURN
            else:
                with pytest.raises(ProtocolError, match="gzip: the body was cut short"):
                    await run(built, stream)
        await built.aclose()
    assert len(proxy.requests) == 1


async def test_an_empty_body_declared_compressed_is_empty() -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(response(500, b"", GZIP))
        built = adapter_for(proxy.url)
        with anyio.fail_after(10), pytest.raises(ServerError):
            await run(built, False)
        await built.aclose()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_valid_encoded_body_reads_as_the_plain_one(encoding: str, stream: bool) -> None:
    plain = sse_body() if stream else REPLY
    body = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    kind = "text/event-stream" if stream else "application/json"
    async with FaultProxy.running() as proxy:
        proxy.script(response(200, body, {"content-encoding": encoding, "content-type": kind}))
        built = adapter_for(proxy.url)
        with anyio.fail_after(10):
            events = await run(built, stream)
        await built.aclose()
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind is StopKind.END_TURN


@functools.cache
def _bomb(layers: int, size: int = 64 << 20) -> bytes:
    """``size`` zero bytes, gzip-compressed ``layers`` times (a few hundred bytes for two)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    body = b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()
    for _ in range(layers - 1):
        body = gzip.compress(body, compresslevel=9)
    return body


@pytest.mark.parametrize("encoding", ["gzip", "gzip, gzip"])
async def test_a_compression_bomb_is_decoded_in_bounded_pieces(encoding: str) -> None:
    # httpx decoded each chunk whole: a 300-byte body twice gzipped became 4 MiB in one step
    # (1.8 KB became 1 GiB: 2 GB of memory), before the framing's limits could look at it.
    from metis.pipeline.request import ResponseHead, WireRequest
    from metis.transport.decoding import PIECE
    from metis.transport.stage import Transport

    from ..helpers import bound, make_call

    body = _bomb(encoding.count("gzip"), 4 << 20)
    headers = {"content-encoding": encoding, "content-type": "text/event-stream"}

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield body

    def answer(request: object) -> httpx.Response:
        return httpx.Response(200, headers=headers, stream=Body())

    wire = WireRequest(url="https://api.example.com/v1/messages", body={}, headers={}, stream=True)
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        items = bound(Transport(), http=http)(wire, make_call(), None)  # type: ignore[arg-type]
        assert isinstance(await anext(items), ResponseHead)
        sizes = [len(await anext(items)) for _ in range(8)]
        await items.aclose()
    assert max(sizes) <= PIECE and sum(sizes) == 8 * PIECE


@pytest.mark.slow  # 65 MiB compressed, then decoded to the limit: seconds
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_compression_bomb_ends_at_the_framing_limit(stream: bool) -> None:
    async with FaultProxy.running() as proxy:
        proxy.script(response(200, _bomb(2, 65 << 20), {"content-encoding": "gzip, gzip"}))
        built = adapter_for(proxy.url)
        with anyio.fail_after(20), pytest.raises(ProtocolError, match="MiB"):
            await run(built, stream)
        await built.aclose()


@pytest.mark.parametrize("header", [True, False], ids=["zlib", "raw"])
def test_deflate_is_read_with_or_without_its_zlib_header(header: bool) -> None:
    from metis.transport.decoding import _Layer

    packer = zlib.compressobj(wbits=zlib.MAX_WBITS if header else -zlib.MAX_WBITS)
    body = packer.compress(REPLY) + packer.flush()
    layer = _Layer("deflate")
    assert b"".join([*layer.feed(body[:7]), *layer.feed(body[7:]), *layer.finish()]) == REPLY


async def test_an_encoded_answer_a_mock_transport_has_already_read_is_read_as_it_is() -> None:
    from metis.pipeline.request import WireRequest
    from metis.transport.stage import Transport

    from ..helpers import bound, make_call

    def answer(request: object) -> httpx.Response:
        return httpx.Response(200, headers=GZIP, content=gzip.compress(b"already read"))

    wire = WireRequest(url="https://api.example.com/v1/messages", body={}, headers={}, stream=True)
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        items = [item async for item in bound(Transport(), http=http)(wire, make_call(), None)]  # type: ignore[arg-type]
    assert b"".join(items[1:]) == b"already read"


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
async def test_metis_own_client_asks_only_for_what_it_decodes_in_bounded_pieces(
    lean: bool,
) -> None:
    # It asked for 'gzip, deflate, zstd' (httpx's default, with zstandard installed): a zstd
    # answer is decoded by httpx whole, 16 KiB becoming 512 MiB in one step (1.1 GB of memory
    # before the framing's 32 MiB line limit could look at it).
    from metis.transport.stage import http_client

    async with FaultProxy.running() as proxy:
        proxy.script(response(200, REPLY, {"content-type": "application/json"}))
        client = http_client(lean=lean)
        built = adapter_for(proxy.url, client=client)
        with anyio.fail_after(10):
            await run(built, False)
        await built.aclose()
        await client.aclose()
    assert proxy.requests[0].headers["accept-encoding"] == "gzip, deflate"
