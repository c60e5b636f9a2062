"""Codec bugs are not protocol errors; malformed server data is, naming the field.

Every codec reads server values through ``metis.wire.read``: a value of the wrong
shape is a ``ProtocolError`` that says which field held what. Anything else a codec raises is
a bug in the codec and must escape as itself, never dressed up as a misbehaving server, so
these tests plant a bug in a helper each codec calls and check it comes out unchanged.
Sans-IO: the codecs are driven directly with hand-made objects.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model.content import Message, ProviderRaw, ThinkingBlock
from metis.model.request import CanonicalRequest
from metis.stacks.loader import load_stack
from metis.wire import read as wire_read
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec, get_codec

# One valid reply per codec: its streamed objects and its non-streamed body --------------------

_ANTHROPIC_STREAM: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "m", "content": [], "usage": {"input_tokens": 3}},
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]
_ANTHROPIC_BODY = {
    "id": "msg_1",
    "type": "message",
    "content": [{"type": "text", "text": "hi"}],
    "usage": {"input_tokens": 3, "output_tokens": 2},
    "stop_reason": "end_turn",
}
_RESPONSES_ITEM = {
    "type": "message",
    "id": "msg_1",
    "content": [{"type": "output_text", "text": "hi"}],
}
_RESPONSES_BODY = {
    "id": "resp_1",
    "model": "m",
    "status": "completed",
    "output": [_RESPONSES_ITEM],
    "usage": {"input_tokens": 3, "output_tokens": 2},
}
_CONVERSE_USAGE = {"inputTokens": 3, "outputTokens": 2}
_OLLAMA_DONE = {
    "model": "m",
    "message": {"role": "assistant", "content": ""},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 3,
    "eval_count": 2,
}
_GEMINI_USAGE = {"promptTokenCount": 3, "candidatesTokenCount": 2}


def _chunk(event: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic event as Bedrock's InvokeModel stream wraps it."""
    return {"chunk": {"bytes": base64.b64encode(json.dumps(event).encode()).decode()}}


REPLIES: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "anthropic": (_ANTHROPIC_STREAM, _ANTHROPIC_BODY),
    "bedrock_anthropic": ([_chunk(event) for event in _ANTHROPIC_STREAM], _ANTHROPIC_BODY),
    "openai_chat": (
        [
            {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
            {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
        ],
        {
            "id": "c",
            "model": "m",
            "choices": [
                {"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"},
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        },
    ),
    "openai_responses": (
        [
            {"type": "response.created", "response": {"id": "resp_1", "model": "m"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "content": []},
            },
            {"type": "response.output_text.delta", "output_index": 0, "delta": "hi"},
            {"type": "response.output_item.done", "output_index": 0, "item": _RESPONSES_ITEM},
            {"type": "response.completed", "response": _RESPONSES_BODY},
        ],
        _RESPONSES_BODY,
    ),
    "bedrock_converse": (
        [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "hi"}}},
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"messageStop": {"stopReason": "end_turn"}},
            {"metadata": {"usage": _CONVERSE_USAGE}},
        ],
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
            "usage": _CONVERSE_USAGE,
            "stopReason": "end_turn",
        },
    ),
    "ollama": (
        [
            {"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": False},
            _OLLAMA_DONE,
        ],
        {**_OLLAMA_DONE, "message": {"role": "assistant", "content": "hi"}},
    ),
    "gemini": (
        [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}]},
            {
                "candidates": [
                    {"content": {"role": "model", "parts": [{"text": "!"}]}, "finishReason": "STOP"}
                ],
                "usageMetadata": _GEMINI_USAGE,
            },
        ],
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": _GEMINI_USAGE,
        },
    ),
}


def codec_for(name: str) -> Codec:
    if name != "gemini":
        return get_codec(name)
    (normalize,) = [s for s in load_stack("gemini").stages if s.name == "normalize"]
    return get_codec("schema", normalize.options["settings"])


def stream(codec: Codec, objects: list[dict[str, Any]]) -> MessageBuilder:
    builder = MessageBuilder("test", "m")
    parser = codec.stream_parser(builder)
    for obj in objects:
        parser.feed(obj)
    parser.end()
    return builder


def body(codec: Codec, obj: dict[str, Any]) -> MessageBuilder:
    builder = MessageBuilder("test", "m")
    codec.parse_body(obj, builder)
    return builder


@pytest.mark.parametrize("name", list(REPLIES))
def test_each_valid_reply_reads_cleanly(name: str) -> None:
    """The replies the bug tests plant into are themselves read without an error."""
    objects, whole = REPLIES[name]
    for builder in (stream(codec_for(name), objects), body(codec_for(name), whole)):
        assert builder.completed
        assert builder.usage_reported
        assert "".join(builder.output_text()).startswith("hi")


BUGS: list[type[Exception]] = [KeyError, TypeError, IndexError, AttributeError, ValueError]


HELPERS = ["text", "usage"]


@pytest.mark.parametrize("name", list(REPLIES))
@pytest.mark.parametrize("read", [stream, body], ids=["stream", "body"])
def test_a_bug_planted_in_a_helper_escapes_as_itself(
    monkeypatch: pytest.MonkeyPatch, read: Callable[[Codec, Any], MessageBuilder], name: str
) -> None:
    """A builder method every codec calls raises as a bug would; the codec must let it out
    as what it is, not report the server's valid reply as malformed. Each bug in each helper
    (a loop: an item each cost more than the check)."""
    objects, whole = REPLIES[name]
    for helper, bug in itertools.product(HELPERS, BUGS):

        def planted(*args: Any, bug: type[Exception] = bug, **kwargs: Any) -> None:
            raise bug("planted")

        with monkeypatch.context() as patch:
            patch.setattr(MessageBuilder, helper, planted)
            with pytest.raises(bug, match="planted") as caught:
                read(codec_for(name), objects if read is stream else whole)
        assert not isinstance(caught.value, ProtocolError), (helper, bug)


# The accessors: each malformed shape is a ProtocolError naming the field -----------------------

SHAPES: list[tuple[Callable[[], Any], str]] = [
    (
        lambda: wire_read.object_value([1, 2], "message_delta.usage"),
        r"^message_delta.usage: expected an object, got list \[1, 2\]$",
    ),
    (lambda: wire_read.text_value(7, "delta.text"), r"^delta.text: expected a string, got int 7$"),
    (lambda: wire_read.list_value({}, "response.output"), "^response.output: expected a list"),
    (lambda: wire_read.text_value(1.5, "x.id"), "^x.id: expected a string, got float 1.5$"),
    (lambda: wire_read.required({}, "delta", "event"), "^event.delta is missing$"),
    (lambda: wire_read.required({"delta": None}, "delta", "event"), "^event.delta is missing$"),
    (
        lambda: wire_read.required_object({"usage": "none"}, "usage", "message_delta"),
        "^message_delta.usage: expected an object, got string 'none'$",
    ),
    (
        lambda: wire_read.required_object({}, "message", "message_start"),
        r"^message_start.message is missing \(expected an object\)$",
    ),
    (
        lambda: wire_read.required_text({"text": True}, "text", "text_delta"),
        "^text_delta.text: expected a string, got bool True$",
    ),
    (
        lambda: wire_read.required_list({"content": "hi"}, "content", "message"),
        "^message.content: expected a list, got string 'hi'$",
    ),
    (
        lambda: wire_read.required_index({"index": "0"}, "index", "content_block_stop"),
        "^content_block_stop.index: expected a whole number, got string '0'$",
    ),
    (
        lambda: wire_read.required_index({"index": 1.0}, "index", "content_block_stop"),
        "^content_block_stop.index: expected a whole number, got float 1.0$",
    ),
    (
        lambda: wire_read.optional_object({"usage": [1]}, "usage", "message_delta"),
        r"^message_delta.usage: expected an object, got list \[1\]$",
    ),
    (
        lambda: wire_read.optional_text({"id": {"a": 1}}, "id", "message"),
        "^message.id: expected a string, got object",
    ),
    (
        lambda: wire_read.optional_list({"tool_calls": {}}, "tool_calls", "message"),
        "^message.tool_calls: expected a list, got object",
    ),
    (
        lambda: wire_read.token_count(10**40, "output_tokens"),
        "a 133-bit number",
    ),
]


@pytest.mark.parametrize("count", [-1, -9.0])
def test_a_negative_count_is_one_that_cannot_be_true(count: float) -> None:
    # codecs read it as an unknown usage (read.counts_of); elsewhere it is a ProtocolError
    with pytest.raises(wire_read.UntrueCount, match=r"input_tokens -[19]") as caught:
        wire_read.token_count(count, "input_tokens", "anthropic")
    assert isinstance(caught.value, ProtocolError) and caught.value.value == count


@pytest.mark.parametrize(("read", "problem"), SHAPES)
def test_each_malformed_shape_is_a_protocol_error_naming_the_field(
    read: Callable[[], Any], problem: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        read()
    assert type(caught.value) is ProtocolError
    assert re.search(problem, caught.value.message), caught.value.message


def test_what_was_there_is_shown_short() -> None:
    with pytest.raises(ProtocolError) as caught:
        wire_read.object_value("A" * 100_000, "x")
    assert len(caught.value.message) < 200
    with pytest.raises(ProtocolError) as caught:
        wire_read.object_value([[[[[1]]]]] * 1000, "x")
    assert len(caught.value.message) < 200


@pytest.mark.parametrize(
    ("read", "value"),
    [
        (lambda: wire_read.object_value({"a": 1}, "x"), {"a": 1}),
        (lambda: wire_read.text_value("", "x"), ""),
        (lambda: wire_read.optional_text({}, "id", "x"), None),
        (lambda: wire_read.optional_text({"id": None}, "id", "x"), None),
        (lambda: wire_read.optional_object({}, "usage", "x"), None),
        (lambda: wire_read.optional_list({}, "tool_calls", "x"), []),
        (lambda: wire_read.optional_list({"tool_calls": None}, "tool_calls", "x"), []),
        (lambda: wire_read.required_index({"index": 0}, "index", "x"), 0),
        (lambda: wire_read.required({"a": 0}, "a", "x"), 0),
        (lambda: wire_read.token_count(12.0, "n"), 12),
    ],
)
def test_well_shaped_values_pass_through(read: Callable[[], Any], value: Any) -> None:
    assert read() == value


@dataclass
class PlainContext:
    """An EncodeContext that is not the pipeline's Call: the codecs need nothing more."""

    request_id: str = "req_1"
    provider: str = "test"
    model: str = "test:m"
    wire_model: str = "m"
    dropped: list[str] = field(default_factory=list)

    def produced(self, origin: ProviderRaw | None) -> bool:
        return origin is not None and (origin.provider, origin.model) == ("test", self.model)

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        self.dropped.append(block_type)


@pytest.mark.parametrize("name", list(REPLIES))
def test_a_codec_encodes_for_any_encode_context(name: str) -> None:
    """Sans-IO: encoding takes an EncodeContext, which the pipeline's Call is one of."""
    context = PlainContext()
    history = [
        Message.user("hi"),
        Message(role="assistant", content=[ThinkingBlock(thinking="t", signature="s")]),
        Message.user("and?"),
    ]
    request = CanonicalRequest(model="test:m", messages=history, max_output_tokens=9)
    body = codec_for(name).encode(request, context)
    assert "hi" in json.dumps(body)
    assert context.dropped in ([], ["thinking"])  # reasoning of another model, or none
