"""Anthropic's ``stop_details``: a refusal says its policy category (``{"type": "refusal",
"category": "cyber" | "bio" | ..., "explanation"}``, on the message and, streamed, on
``message_delta``'s delta; the SDK's ``RefusalStopDetails``, provider-changes-2026.md).
metis reads the category into ``StopReason.category``, the gateway's Messages writer writes
it back, and the emulator sends it on a scripted refusal."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ProtocolError
from metis.gateway.anthropic_write import MessageStream, write_message
from metis.model import CanonicalRequest, Message, MessageComplete
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.testing.emulator import Emulator, Reply
from metis.wire.anthropic.read import parse_body

from ..helpers import answer

pytestmark = pytest.mark.backend_independent

REFUSED = Reply(text="I can't help with that.", stop="refusal", category="cyber")


def _ask() -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-opus-5",
        messages=[Message.user("Write malware")],
        max_output_tokens=100,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_refusals_category_is_read_whole_and_streamed(stream: bool) -> None:
    with Emulator(model=[REFUSED]) as emulator:
        config = AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"), max_retries=0)
        reply = await answer(build_adapter("anthropic", config), _ask(), stream)
    assert reply.stop_reason.kind is StopKind.REFUSAL
    assert reply.stop_reason.category == "cyber"
    assert reply.text == "I can't help with that."


def _post(emulator: Emulator, stream: bool) -> httpx.Response:
    body = {
        "model": "claude-opus-5",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": "Write malware"}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    return httpx.post(f"{emulator.base_url('anthropic')}/v1/messages", json=body, headers=headers)


def _deltas(text: str) -> list[dict[str, Any]]:
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    return [e["delta"] for e in events if e["type"] == "message_delta"]


def test_the_emulator_sends_stop_details_on_a_scripted_refusal() -> None:
    with Emulator(model=[REFUSED, REFUSED, "Hi"]) as emulator:
        whole = _post(emulator, False).json()
        streamed = _deltas(_post(emulator, True).text)
        plain = _post(emulator, False).json()
    details = {"type": "refusal", "category": "cyber"}
    assert whole["stop_reason"] == "refusal" and whole["stop_details"] == details
    assert [d["stop_details"] for d in streamed] == [details]
    assert "stop_details" not in plain  # another stop has none


def _response(reason: StopReason) -> CanonicalResponse:
    return CanonicalResponse(
        request_id="r",
        model="m",
        provider="anthropic",
        content=[],
        stop_reason=reason,
        usage=TokenUsage(input_tokens=1, output_tokens=1),
        latency_ms=0,
    )


def test_the_gateway_writes_the_category_back_whole_and_streamed() -> None:
    refused = StopReason(kind=StopKind.REFUSAL, raw="refusal", category="bio")
    body = write_message(_response(refused), "claude-opus-5")
    assert body["stop_details"] == {"type": "refusal", "category": "bio"}
    stream = MessageStream("claude-opus-5", None, "msg_1", TokenUsage(output_tokens=1))
    written = stream.feed(MessageComplete([], refused, TokenUsage(output_tokens=1)))
    assert _deltas(written.decode())[0]["stop_details"] == {"type": "refusal", "category": "bio"}
    filtered = StopReason(kind=StopKind.CONTENT_FILTER, raw="SAFETY")  # written as a refusal
    assert write_message(_response(filtered), "m")["stop_details"]["category"] is None
    assert "stop_details" not in write_message(_response(StopReason(kind=StopKind.END_TURN)), "m")


def test_stop_details_that_is_not_an_object_is_a_protocol_error() -> None:
    from metis.wire.builder import MessageBuilder

    body = {"id": "msg_1", "model": "m", "content": [], "stop_reason": "refusal"}
    with pytest.raises(ProtocolError, match="stop_details"):
        parse_body({**body, "stop_details": "cyber"}, MessageBuilder("anthropic", "m"))
    parse_body({**body, "stop_details": None}, MessageBuilder("anthropic", "m"))  # null: none


def test_the_category_is_dumped_only_when_set_and_read_back() -> None:
    refused = StopReason(kind=StopKind.REFUSAL, raw="refusal", category="cyber")
    assert StopReason.model_validate(refused.model_dump()) == refused
    assert "category" not in StopReason(kind=StopKind.END_TURN).model_dump()


EXPLAINED = Reply(
    text="",
    stop="refusal",
    category="cyber",
    explanation="This request could enable malware development.",
)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_refusals_explanation_reaches_the_reply_whole_and_streamed(stream: bool) -> None:
    with Emulator(model=[EXPLAINED]) as emulator:
        config = AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"), max_retries=0)
        reply = await answer(build_adapter("anthropic", config), _ask(), stream)
    assert reply.stop_reason.kind is StopKind.REFUSAL and reply.stop_reason.category == "cyber"
    assert reply.stop_reason.explanation == EXPLAINED.explanation
    assert StopReason.model_validate(reply.stop_reason.model_dump()) == reply.stop_reason


def test_the_gateway_writes_the_explanation_back_in_each_callers_shape() -> None:
    """Messages: in ``stop_details``; Chat Completions: as the message's ``refusal``, whole and
    streamed (a delta before the finish), where OpenAI gives a refusal's words."""
    from metis.gateway.chat_write import ChunkStream, write_completion

    said = "This request could enable malware development."
    refused = StopReason(kind=StopKind.REFUSAL, raw="refusal", category="cyber", explanation=said)
    details = {"type": "refusal", "category": "cyber", "explanation": said}
    assert write_message(_response(refused), "claude-opus-5")["stop_details"] == details
    stream = MessageStream("claude-opus-5", None, "msg_1", TokenUsage(output_tokens=1))
    written = stream.feed(MessageComplete([], refused, TokenUsage(output_tokens=1)))
    assert _deltas(written.decode())[0]["stop_details"] == details
    completion = write_completion(_response(refused), "gpt")
    assert completion["choices"][0]["message"]["refusal"] == said
    chunks = ChunkStream("gpt", False).feed(
        MessageComplete([], refused, TokenUsage(output_tokens=1))
    )
    events = [
        json.loads(line[6:])
        for line in chunks.decode().splitlines()
        if "[DONE]" not in line and line.startswith("data: ")
    ]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert {"refusal": said} in deltas
    plain = write_completion(_response(StopReason(kind=StopKind.REFUSAL, raw="refusal")), "gpt")
    assert plain["choices"][0]["message"]["refusal"] is None
