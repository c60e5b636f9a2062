"""A Chat Completions audio reply (``modalities: ["text", "audio"]``): the message's ``audio``
(``id``, base64 ``data``, ``transcript``, ``expires_at``; streamed: ``delta.audio`` pieces
whose ``transcript`` and ``data`` add up) is kept as one opaque block of kind ``audio``, not
dropped; it goes back to the same provider as the assistant message's ``audio`` by its id,
and to another provider it is left out. Sans-IO."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model.content import Message, OpaqueBlock, Role
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import codec
from tests.helpers import make_call

from ..helpers import checked_final

SPOKEN = {"id": "audio_fjord1", "data": "UklGRg==", "transcript": "Good day.", "expires_at": 17}


def whole(message: dict[str, Any]) -> Any:
    body = {
        "id": "chatcmpl-voice1",
        "model": "gpt-audio",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 30, "total_tokens": 39},
    }
    return checked_final(codec.parse_body(body, MessageBuilder("openai", "openai:gpt-audio")))


def test_a_whole_audio_reply_keeps_the_audio() -> None:
    done = whole({"role": "assistant", "content": None, "audio": dict(SPOKEN)})
    [block] = done.final_content
    assert isinstance(block, OpaqueBlock)
    assert block.kind == "audio"
    assert block.provider_raw.data["item"] == SPOKEN
    assert done.stop_reason.kind is StopKind.END_TURN


def test_an_audio_field_that_is_not_an_object_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="audio"):
        whole({"role": "assistant", "content": None, "audio": "UklGRg=="})


def test_an_audio_field_with_every_field_empty_is_no_audio() -> None:
    """Snowflake Cortex fills every field of its message, an unused ``audio`` with ``""`` and
    ``0``: no audio block, whole or streamed."""
    unused = {"id": "", "data": "", "transcript": "", "expires_at": 0}
    done = whole({"role": "assistant", "content": "Fair winds.", "audio": unused})
    assert [block.type for block in done.final_content] == ["text"]
    parser = codec.stream_parser(MessageBuilder("openai", "openai:gpt-audio"))
    pieces = [chunk({"content": "Calm.", "audio": unused}), chunk({}, "stop")]
    events = [event for obj in pieces for event in parser.feed(obj)]
    assert [b.type for b in checked_final([*events, *parser.end()]).final_content] == ["text"]


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-voice2", "model": "gpt-audio", "choices": [choice]}


def test_streamed_audio_pieces_add_up_to_one_block() -> None:
    parser = codec.stream_parser(MessageBuilder("openai", "openai:gpt-audio"))
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk({"audio": {"id": "audio_fjord1", "transcript": "Good "}}),
        chunk({"audio": {"transcript": "day."}}),
        chunk({"audio": {"id": "audio_fjord1", "data": "UklG"}}),
        chunk({"audio": {"data": "Rg=="}}),
        chunk({"audio": {"expires_at": 17}}, "stop"),
    ]
    events = [event for obj in chunks for event in parser.feed(obj)]
    done = checked_final([*events, *parser.end()])
    [block] = done.final_content
    assert isinstance(block, OpaqueBlock)
    assert block.provider_raw.data["item"] == SPOKEN


def test_the_audio_goes_back_by_its_id_to_its_provider_only() -> None:
    reply = whole({"role": "assistant", "content": None, "audio": dict(SPOKEN)})
    history = [
        Message.user("Greet me."),
        Message(role=Role.ASSISTANT, content=reply.final_content),
        Message.user("Again, slower."),
    ]
    request = CanonicalRequest(model="openai:gpt-audio", messages=history, max_output_tokens=64)
    assistant = codec.encode(request, make_call("openai", "openai:gpt-audio"))["messages"][1]
    assert assistant["audio"] == {"id": "audio_fjord1"}
    assert "UklG" not in json.dumps(assistant)
    other = codec.encode(request, make_call("groq", "groq:whisper"))["messages"][1]
    assert "audio" not in other
