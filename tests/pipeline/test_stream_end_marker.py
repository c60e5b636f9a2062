"""The framing's end marker decides whether a stream that never said why it stopped is whole:
an OpenAI-style stream ended by ``[DONE]`` with no ``finish_reason`` (as Snowflake Cortex sends
it) is a finished reply; the same stream cut before ``[DONE]`` is a reply cut short, an error
that keeps what arrived."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.adapter import Adapter
from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message, StreamEvent
from metis.model.events import MessageComplete
from metis.model.response import StopKind

REQUEST = CanonicalRequest(
    model="openai:gpt-4o", messages=[Message.user("2 + 2?")], max_output_tokens=8, stream=True
)
CHUNKS: list[dict[str, Any]] = [
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "4"}}]},
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": ""}}]},
    {
        "id": "c1",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 22, "completion_tokens": 5},
    },
]


def adapter(done: bool) -> Adapter:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in CHUNKS)
    body += b"data: [DONE]\n\n" if done else b""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return build_adapter("openai", api_key="k", http_client=client, max_retries=0)


@pytest.mark.anyio
async def test_done_without_finish_reason_ends_the_reply_as_a_turns_end() -> None:
    async with adapter(done=True) as openai:
        events: list[StreamEvent] = [event async for event in openai.stream(REQUEST)]
        whole = await openai.complete(REQUEST)
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.END_TURN, None)
    assert (final.usage.input_tokens, final.usage.output_tokens) == (22, 5)
    assert whole.text == "4" and whole.stop_reason.kind is StopKind.END_TURN


@pytest.mark.anyio
async def test_the_same_stream_without_done_is_cut_short_and_keeps_what_arrived() -> None:
    events: list[StreamEvent] = []
    async with adapter(done=False) as openai:
        with pytest.raises(ProtocolError, match="ended without a finish_reason"):
            async for event in openai.stream(REQUEST):
                events.append(event)
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
    assert final.final_content[0].text == "4"  # type: ignore[union-attr]
