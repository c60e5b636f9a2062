"""Bodies whose Content-Encoding is wrong, over real sockets (tests/fault_proxy.py), under
asyncio and trio: a body that does not decode as its encoding says is the server's own bytes,
a ProtocolError that keeps what arrived and is not sent again; a valid encoded body reads as
the plain one."""

from __future__ import annotations

import gzip
import zlib

import anyio
import pytest

from metis.errors import ProtocolError
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
