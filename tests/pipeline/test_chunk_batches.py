"""The send loop hands on the events of one chunk together (docs/engine.md, "Batches"): a
wrapper that ``takes_batches`` (``retry``) is given lists and resumed once per chunk, any
other wrapper one event at a time, and the caller one event at a time, in order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.adapter import Adapter
from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message, StreamEvent
from metis.model.events import MessageComplete, TextDelta
from metis.pipeline.call import Call
from metis.pipeline.stage import Inner, Stage

EVENTS = (
    b'{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":3}}}',
    b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}',
    b'{"type":"content_block_stop","index":0}',
    b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
    b'{"type":"message_stop"}',
)
BODY = b"".join(b"event: x\ndata: " + line + b"\n\n" for line in EVENTS)
REQUEST = CanonicalRequest(
    model="anthropic:claude-sonnet-4-5", messages=[Message.user("hi")], max_output_tokens=8
)


class Chunks(httpx.AsyncByteStream):
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def adapter(*chunks: bytes) -> Adapter:
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=Chunks(*chunks))

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return build_adapter("anthropic", api_key="k", http_client=client)


class Recorder(Stage[Any, Any, Any, Any]):
    """A wrapper around ``retry`` that writes down each item it is given."""

    name = "recorder"

    def __init__(self, takes_batches: bool) -> None:
        super().__init__()
        self.takes_batches = takes_batches  # type: ignore[misc]
        self.items: list[Any] = []

    async def __call__(
        self, request: Any, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[Any]:
        async for item in inner(request, call):
            self.items.append(item)
            yield item


@pytest.mark.anyio
async def test_the_events_of_one_chunk_go_through_retry_as_one_batch() -> None:
    adapted = adapter(BODY[:150], BODY[150:])
    recorder = Recorder(takes_batches=True)
    adapted.pipeline.insert_before("retry", recorder)
    events = [event async for event in adapted.stream(REQUEST)]
    assert all(item.__class__ is list for item in recorder.items)
    assert len(recorder.items) == 2  # one per chunk (the first holds message.start)
    assert [e for batch in recorder.items for e in batch] == events
    assert [e.type for e in events] == [
        "message.start",
        "text.delta",
        "text.delta",
        "message.complete",
    ]


@pytest.mark.anyio
async def test_a_wrapper_that_looks_at_events_is_given_them_one_at_a_time() -> None:
    adapted = adapter(BODY)
    recorder = Recorder(takes_batches=False)
    adapted.pipeline.insert_before("retry", recorder)
    events = [event async for event in adapted.stream(REQUEST)]
    assert recorder.items == events
    assert isinstance(events[-1], MessageComplete)


@pytest.mark.anyio
async def test_what_a_chunk_made_before_its_failure_reaches_the_caller_first() -> None:
    broken = BODY[: BODY.index(b"event: x\ndata: " + EVENTS[4])] + b"event: x\ndata: {nope\n\n"
    adapted = adapter(broken)
    got: list[StreamEvent] = []
    with pytest.raises(ProtocolError) as raised:
        async for event in adapted.stream(REQUEST):
            got.append(event)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["Hel", "lo"]
    final = got[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind == "error"
    assert "JSON" in str(raised.value)
