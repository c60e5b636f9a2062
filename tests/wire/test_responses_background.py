"""A Responses reply still pending (OpenAI's background mode, ``background: true``): the create
call answers at once with the response ``queued`` (or ``in_progress``) and no output, and the
result is fetched later by its id. metis reads finished replies only, so a pending one is a
classified error naming the response, never an empty reply with an ending a caller would take
for a finished one. A streamed background reply runs to its end and reads as any other."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import InvalidRequestError, ProtocolError
from metis.model.content import Message, TextBlock
from metis.model.events import MessageComplete
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses import OpenAIResponsesCodec
from tests.recordings import ROOT, interactions

PROVIDER, MODEL = "openai_responses", "openai_responses:gpt-5"
codec = OpenAIResponsesCodec()


def pending(status: str) -> dict[str, Any]:
    return {
        "id": "resp_bg1",
        "object": "response",
        "status": status,
        "background": True,
        "error": None,
        "model": "gpt-5-2025-08-07",
        "output": [],
        "usage": None,
    }


@pytest.mark.parametrize("status", ["queued", "in_progress"])
def test_a_pending_body_is_an_error_naming_the_response(status: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        codec.parse_body(pending(status), MessageBuilder(PROVIDER, MODEL))
    error = caught.value
    assert not error.retryable  # a retry would start another background response, billed
    assert "resp_bg1" in error.message and status in error.message
    assert "background" in error.message


@pytest.mark.parametrize("status", [[], {"queued": 1}])
def test_a_status_that_is_not_a_word_is_not_taken_for_pending(status: Any) -> None:
    with contextlib.suppress(ProtocolError):  # read, or refused as malformed: no TypeError
        codec.parse_body(pending(status), MessageBuilder(PROVIDER, MODEL))


def test_a_finished_background_body_reads_as_any_other() -> None:
    body = pending("completed")
    body["output"] = [
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        }
    ]
    events = codec.parse_body(body, MessageBuilder(PROVIDER, MODEL))
    done = events[-1]
    assert isinstance(done, MessageComplete)
    assert done.stop_reason.kind is StopKind.END_TURN
    assert [b.text for b in done.final_content if isinstance(b, TextBlock)] == ["Done."]


def _stream_events() -> list[dict[str, Any]]:
    """A background stream as OpenAI sends it: created and queued before in_progress."""
    queued = pending("queued")
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress"}
    done_item = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
    }
    return [
        {"type": "response.created", "response": queued},
        {"type": "response.queued", "response": queued},
        {"type": "response.in_progress", "response": pending("in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {"type": "response.completed", "response": {**pending("completed"), "output": [done_item]}},
    ]


def test_a_streamed_background_reply_runs_to_its_end() -> None:
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    events = [event for obj in _stream_events() for event in parser.feed(obj)]
    events += parser.end()
    ends = [e for e in events if isinstance(e, MessageComplete)]
    assert len(ends) == 1 and ends[0].stop_reason.kind is StopKind.END_TURN
    assert [b.text for b in ends[0].final_content if isinstance(b, TextBlock)] == ["Hi"]


def test_a_background_stream_cut_while_pending_is_an_error_not_an_empty_reply() -> None:
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    events = [event for obj in _stream_events()[:3] for event in parser.feed(obj)]
    assert not any(isinstance(e, MessageComplete) for e in events)
    with pytest.raises(ProtocolError) as caught:
        parser.end()
    assert "resp_bg1" in caught.value.message  # the response goes on at the provider


@pytest.mark.anyio
async def test_a_call_answered_pending_raises_and_is_not_retried() -> None:
    """Through an adapter of the openai_responses stack, as ``background: true`` in its
    provider options reaches the provider: one request sent, the error raised."""
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=pending("queued"))

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    adapter = build_adapter(
        "openai_responses",
        AdapterConfig(api_key="k", http_client=client),
        tool_id_store=InMemoryToolIdStore(),
    )
    request = CanonicalRequest(
        model="openai_responses:gpt-5",
        messages=[Message.user("hi")],
        max_output_tokens=64,
        provider_options={"openai_responses": {"background": True}},
    )
    with pytest.raises(InvalidRequestError, match="resp_bg1"):
        await adapter.complete(request)
    assert len(sent) == 1 and sent[0]["background"] is True


RECORDING = (
    ROOT
    / "openai_responses"
    / "pydantic-ai__test_openai_responses__test_background_mode_streaming_vcr.yaml"
)


@pytest.mark.skipif(not RECORDING.exists(), reason="the real traffic is not here")
def test_the_recorded_background_stream_reads_as_any_other() -> None:
    """pydantic-ai's recording: ``background: true`` with ``stream: true``, created and queued
    before in_progress, then the reply to its ``response.completed``."""
    [exchange] = interactions(RECORDING)
    text = exchange["response"]["body"]["string"]
    lines = (line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    events = [event for line in lines if line for event in parser.feed(json.loads(line))]
    events += parser.end()
    [done] = [e for e in events if isinstance(e, MessageComplete)]
    assert done.stop_reason.kind is StopKind.END_TURN
    assert [b.text for b in done.final_content if isinstance(b, TextBlock)] == ["2 + 2 equals 4."]
