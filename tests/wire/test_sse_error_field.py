"""llama.cpp's server (and servers built on it, such as GPUStack) tells a failure in the middle
of a stream as an event with one ``error:`` field and no data. It is read as the error it says,
classified (a prompt past the context size is a context overflow), with the text before it
kept, instead of a stream said to end without its finish reason. Cut anywhere. Sans-IO."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.errors import AdapterError, ContextOverflowError, ServerError
from metis.wire.builder import MessageBuilder
from metis.wire.framing.objects import BodyObjects
from metis.wire.framing.sse_data import SSEDataDecoder
from metis.wire.openai_chat import codec

CHUNK = {
    "id": "chatcmpl-1",
    "model": "qwen3",
    "object": "chat.completion.chunk",
    "choices": [{"index": 0, "delta": {"content": "The sea"}, "finish_reason": None}],
}
TOO_LONG = {
    "code": 400,
    "message": "the request exceeds the available context size, try increasing it",
    "type": "exceed_context_size_error",
}
WRAPPED = {"detail": "failed to decode, try again", "error": {"message": "failed to decode"}}


def _body(error_line: str) -> bytes:
    return f"data: {json.dumps(CHUNK)}\n\n{error_line}\n\n".encode()


def _objects(body: bytes, size: int) -> list[dict[str, Any]]:
    objects = BodyObjects("sse", streamed=True, content_type="text/event-stream")
    out = [obj for i in range(0, len(body), size) for obj in objects.feed(body[i : i + size])]
    return [*out, *objects.close()]


@pytest.mark.parametrize("size", [1, 7, 10_000])
def test_an_error_field_is_an_error_object_after_the_data_before_it(size: int) -> None:
    first, error = _objects(_body(f"error: {json.dumps(TOO_LONG)}"), size)
    assert first == CHUNK
    assert error == {"type": "error", "error": TOO_LONG}


@pytest.mark.parametrize(
    ("line", "cls", "message"),
    [
        (f"error: {json.dumps(TOO_LONG)}", ContextOverflowError, "available context size"),
        (f"error: {json.dumps(WRAPPED)}", ServerError, "failed to decode"),
        ("error: the model crashed", ServerError, "the model crashed"),
    ],
)
def test_the_chat_reader_raises_it_classified_keeping_the_text(
    line: str, cls: type[AdapterError], message: str
) -> None:
    builder = MessageBuilder("llamacpp", "llamacpp:qwen3")
    parser = codec.stream_parser(builder)
    objects = _objects(_body(line), 97)
    parser.feed(objects[0])
    with pytest.raises(AdapterError) as caught:
        parser.feed(objects[1])
    assert type(caught.value) is cls and message in caught.value.message
    assert builder.output_text() == ["The sea"]


def test_data_wins_over_an_error_field_in_one_event_and_other_fields_stay_dropped() -> None:
    decoder = SSEDataDecoder()
    events = decoder.feed(b'error: {"message": "x"}\ndata: {"a": 1}\n\nretry: 10\nid: 4\n\n')
    assert events == ['{"a": 1}']
    assert decoder.feed(b"error: one\nerror: two\n\n") == [
        json.dumps({"type": "error", "error": {"message": "one\ntwo"}})
    ]
