"""The Anthropic Messages codec: encoding, stream and body parsing, error classification."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from metis.errors import (
    AuthError,
    ContextOverflowError,
    ErrorClass,
    InvalidRequestError,
    OverloadedError,
    ProtocolError,
    RateLimitError,
    ServerError,
)
from metis.model.content import (
    EMPTY_ERROR_RESULT,
    Base64ImageSource,
    ImageBlock,
    Message,
    OpaqueBlock,
    RedactedThinkingBlock,
    Role,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import (
    CanonicalRequest,
    ThinkingConfig,
    ToolAnnotations,
    ToolChoice,
    ToolDefinition,
)
from metis.model.response import StopKind
from metis.pipeline.call import Call
from metis.wire.anthropic import codec
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.framing.sse import SSEDecoder
from tests.helpers import make_call as call_for

from ..recordings import ROOT, interactions

RECORDINGS = ROOT / "anthropic"
CANONICAL = {"text", "thinking", "redacted_thinking", "tool_use"}
SERVER = "server_tool_use"  # and the *_tool_result blocks answering one


# Helpers -----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, block_type: str, reason: str, **extra: Any) -> None:
        self.calls.append((block_type, reason, extra))

    @property
    def types(self) -> list[str]:
        return [c[0] for c in self.calls]


def make_call() -> Call:
    return call_for("anthropic", "anthropic:claude-sonnet-4-5")


def req(*messages: Message, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=list(messages) or [Message.user("hi")],
        max_output_tokens=kw.pop("max_output_tokens", 1024),
        **kw,
    )


def new_builder() -> tuple[MessageBuilder, Recorder]:
    warns = Recorder()
    return MessageBuilder("anthropic", "anthropic:claude-sonnet-4-5", warns), warns


def run_stream(objs: list[dict[str, Any]]) -> tuple[list[StreamEvent], Recorder]:
    """The events each object and the end of the stream returned, in order."""
    builder, warns = new_builder()
    parser = codec.stream_parser(builder)
    events = [event for obj in objs for event in parser.feed(obj)]
    events += parser.end()
    check_invariants(events)
    return events, warns


def sse_objects(text: str) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    events = decoder.feed(text.encode()) + decoder.close()
    return [json.loads(e.data) for e in events]


def check_invariants(out: list[StreamEvent]) -> None:
    assert isinstance(out[0], MessageStart)
    assert isinstance(out[-1], MessageComplete)
    assert sum(isinstance(e, MessageComplete) for e in out) == 1
    indices = [e.content_block_index for e in out[1:-1]]  # type: ignore[attr-defined]
    assert indices == sorted(indices)
    starts = [e.tool_use_id for e in out if isinstance(e, ToolUseStart)]
    ends = [e.tool_use_id for e in out if isinstance(e, ToolUseEnd)]
    assert starts == ends
    assert len(set(starts)) == len(starts)


def final(events: list[StreamEvent]) -> MessageComplete:
    event = events[-1]
    assert isinstance(event, MessageComplete)
    return event


def start(msg_id: str = "msg_1", **usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {"id": msg_id, "model": "claude-sonnet-4-5", "usage": usage},
    }


def block_start(index: int, **block: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str | None, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}


MESSAGE_STOP = {"type": "message_stop"}


def load(name: str) -> list[dict[str, Any]]:
    if not RECORDINGS.is_dir():
        pytest.skip("real-traffic recordings not available")
    path = RECORDINGS / f"pydantic-ai__{name}.yaml"
    return [i["response"] for i in interactions(path)]


def stream_files() -> list[str]:
    if not RECORDINGS.is_dir():
        return []
    return sorted(p.name for p in RECORDINGS.glob("*.yaml") if "data: {" in p.read_text())


# Encoding ----------------------------------------------------------------------------------


def test_codec_is_registered() -> None:
    assert get_codec("anthropic") is codec
    assert codec.name == "anthropic"


def test_minimal_body() -> None:
    body = codec.encode(req(Message.user("hello")), make_call())
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "stream": False,
    }


def test_system_stop_sequences_temperature_thinking_stream() -> None:
    request = req(
        system_prompt="Be terse.",
        stop_sequences=["END"],
        temperature=1.0,
        thinking=ThinkingConfig(budget_tokens=2048),
        stream=True,
    )
    body = codec.encode(request, make_call())
    assert body["system"] == "Be terse."
    assert body["stop_sequences"] == ["END"]
    assert body["temperature"] == 1.0  # the only temperature thinking allows
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["stream"] is True
    assert "tools" not in body and "tool_choice" not in body


def test_empty_system_is_omitted_and_temperature_zero_kept() -> None:
    body = codec.encode(req(system_prompt="", temperature=0.0), make_call())
    assert "system" not in body
    assert body["temperature"] == 0.0


def test_leftover_system_message_becomes_system_text(caplog: pytest.LogCaptureFixture) -> None:
    request = req(Message.system("Rule two."), Message.user("hi"), system_prompt="Rule one.")
    with caplog.at_level(logging.WARNING):
        body = codec.encode(request, make_call())
    assert body["system"] == "Rule one.\n\nRule two."
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "not hoisted" in caplog.text


def test_output_schema_uses_anthropic_native_structured_output() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    body = codec.encode(req(system_prompt="Be terse.", output_schema=schema), make_call())
    closed = {**schema, "additionalProperties": False}  # structured output's objects are closed
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": closed}}
    assert body["system"] == "Be terse."


def test_whitespace_only_text_is_not_sent() -> None:
    request = req(Message.user("hi"), Message.assistant("  \n"), Message.user("again"))
    body = codec.encode(request, make_call())
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
        }
    ]


def test_roles_merge_and_tool_results_come_first() -> None:
    request = req(
        Message.user("first"),
        Message.user("second"),
        Message.assistant("calling", ToolUseBlock(id="toolu_1", name="f", input={"a": 1})),
        Message.user("by the way"),
        Message.tool(ToolResultBlock(tool_use_id="toolu_1", content="42")),
    )
    messages = codec.encode(request, make_call())["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"] == [
        {"type": "text", "text": "first"},
        {"type": "text", "text": "second"},
    ]
    assert messages[1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "f",
        "input": {"a": 1},
    }
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
        {"type": "text", "text": "by the way"},
    ]


def test_tool_result_forms() -> None:
    image = ImageBlock(source=URLImageSource(url="https://x/y.png"))
    request = req(
        Message.assistant(
            ToolUseBlock(id="a", name="f"),
            ToolUseBlock(id="b", name="f"),
            ToolUseBlock(id="c", name="f"),
            ToolUseBlock(id="d", name="f"),
        ),
        Message.tool(
            ToolResultBlock(tool_use_id="a", content="boom", is_error=True),
            ToolResultBlock(
                tool_use_id="b", content=[TextBlock(text="see"), TextBlock(text=""), image]
            ),
            ToolResultBlock(tool_use_id="c", content=""),
            ToolResultBlock(tool_use_id="d", content="", is_error=True),
        ),
    )
    results = codec.encode(request, make_call())["messages"][1]["content"]
    assert results == [
        {"type": "tool_result", "tool_use_id": "a", "content": "boom", "is_error": True},
        {
            "type": "tool_result",
            "tool_use_id": "b",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            ],
        },
        {"type": "tool_result", "tool_use_id": "c"},
        {
            "type": "tool_result",
            "tool_use_id": "d",
            "content": EMPTY_ERROR_RESULT,
            "is_error": True,
        },
    ]


def test_images_both_kinds() -> None:
    request = req(
        Message.user(
            ImageBlock(source=Base64ImageSource(media_type="image/png", data="AAAA")),
            ImageBlock(source=URLImageSource(url="https://example.com/cat.jpg")),
            "what are these?",
        )
    )
    content = codec.encode(request, make_call())["messages"][0]["content"]
    assert content == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "what are these?"},
    ]


def test_thinking_blocks() -> None:
    call = make_call()
    request = req(
        Message.user("q"),
        Message.assistant(
            ThinkingBlock(thinking="hmm", signature="sig"),
            RedactedThinkingBlock(data="opaque"),
            "answer",
        ),
        Message.user("q2"),
        Message(role=Role.ASSISTANT, content=[ThinkingBlock(thinking="x")], id="m_9"),
        Message.user("q3"),
    )
    messages = codec.encode(request, call)["messages"]
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
    ]
    # The unsigned thinking block is dropped; its message is left empty, so the user turns
    # on either side of it merge.
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["text"] for b in messages[2]["content"]] == ["q2", "q3"]
    [dropped] = call.warnings
    assert dropped.block_type == "thinking" and dropped.message_id == "m_9"


def test_warn_names_message_by_position_without_id() -> None:
    call = make_call()
    codec.encode(req(Message.user("q"), Message.assistant(ThinkingBlock(thinking="x"))), call)
    assert call.warnings[0].message_id == "messages[1]"


def test_empty_text_blocks_are_skipped_silently() -> None:
    call = make_call()
    request = req(Message.user("", "real"), Message.assistant(""), Message.user("more"))
    messages = codec.encode(request, call)["messages"]
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "real"}, {"type": "text", "text": "more"}],
        }
    ]
    assert call.warnings == []


TOOL = ToolDefinition(
    name="get_weather",
    description="Weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    annotations=ToolAnnotations(read_only=True),
)


def test_tools() -> None:
    bare = ToolDefinition(name="ping")
    body = codec.encode(req(tools=[TOOL, bare]), make_call())
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"name": "ping", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        (ToolChoice.auto(), None, {"type": "auto"}),
        (ToolChoice.any(), None, {"type": "any"}),
        (ToolChoice.tool("get_weather"), None, {"type": "tool", "name": "get_weather"}),
        (ToolChoice.none(), None, {"type": "none"}),
        (ToolChoice.any(), False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, True, None),
        (ToolChoice.auto(), True, {"type": "auto"}),
    ],
)
def test_tool_choice(choice: ToolChoice | None, parallel: bool | None, wire: Any) -> None:
    body = codec.encode(
        req(tools=[TOOL], tool_choice=choice, parallel_tool_calls=parallel), make_call()
    )
    assert body.get("tool_choice") == wire


def test_no_tool_choice_without_tools() -> None:
    request = req(tool_choice=ToolChoice.any(), parallel_tool_calls=False)
    assert "tool_choice" not in codec.encode(request, make_call())


def test_encode_does_not_mutate_request() -> None:
    request = req(
        Message.user("a"),
        Message.tool(ToolResultBlock(tool_use_id="t", content="r")),
        tools=[TOOL],
        output_schema={"type": "object"},
        system_prompt="s",
    )
    before = request.model_dump()
    codec.encode(request, make_call())
    codec.encode(request, make_call())
    assert request.model_dump() == before


# Stream parsing: hand-made ---------------------------------------------------------------


def test_text_stream() -> None:
    events, warns = run_stream(
        [
            start(input_tokens=10, output_tokens=1, cache_read_input_tokens=3),
            block_start(0, type="text", text=""),
            {"type": "ping"},
            delta(0, type="text_delta", text="Hel"),
            delta(0, type="text_delta", text="lo"),
            stop(0),
            message_delta("end_turn", output_tokens=7),
            MESSAGE_STOP,
        ]
    )
    assert events[0] == MessageStart("msg_1", "claude-sonnet-4-5")
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta(0, "Hel"),
        TextDelta(0, "lo"),
    ]
    done = final(events)
    assert done.final_content == [TextBlock(text="Hello")]
    assert done.stop_reason.kind is StopKind.END_TURN and done.stop_reason.raw == "end_turn"
    assert done.usage.input_tokens == 10
    assert done.usage.output_tokens == 7
    assert done.usage.cached_input_tokens == 3
    assert done.usage.cache_creation_input_tokens == 0
    assert warns.calls == []


def test_initial_text_in_block_start_is_emitted() -> None:
    events, _ = run_stream(
        [
            start(),
            block_start(0, type="text", text="Hi"),
            delta(0, type="text_delta", text="!"),
            stop(0),
            MESSAGE_STOP,
        ]
    )
    assert final(events).final_content == [TextBlock(text="Hi!")]


def test_thinking_and_signature_stream() -> None:
    events, _ = run_stream(
        [
            start(),
            block_start(0, type="thinking", thinking="", signature=""),
            delta(0, type="thinking_delta", thinking="let me "),
            delta(0, type="thinking_delta", thinking="think"),
            delta(0, type="signature_delta", signature="SIG"),
            stop(0),
            block_start(1, type="redacted_thinking", data="OPAQUE"),
            stop(1),
            block_start(2, type="text", text=""),
            delta(2, type="text_delta", text="ok"),
            stop(2),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert thinking[-2] == ThinkingDelta(0, "", signature="SIG")
    assert thinking[-1] == ThinkingDelta(1, "", redacted_data="OPAQUE")
    content = final(events).final_content
    assert isinstance(content[0], ThinkingBlock)
    assert (content[0].thinking, content[0].signature) == ("let me think", "SIG")
    assert content[1] == RedactedThinkingBlock(data="OPAQUE", provider_raw=content[1].provider_raw)
    assert content[2] == TextBlock(text="ok")


def test_tool_use_stream_with_fragments() -> None:
    events, warns = run_stream(
        [
            start(),
            block_start(0, type="tool_use", id="toolu_1", name="f", input={}),
            delta(0, type="input_json_delta", partial_json=""),
            delta(0, type="input_json_delta", partial_json='{"a": '),
            delta(0, type="input_json_delta", partial_json="1}"),
            stop(0),
            block_start(1, type="tool_use", id="toolu_2", name="g", input={}),
            delta(1, type="input_json_delta", partial_json=""),
            stop(1),
            message_delta("tool_use"),
            MESSAGE_STOP,
        ]
    )
    fragments = [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)]
    assert fragments == ['{"a": ', "1}"]  # raw, and the empty fragment is not an event
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    assert [(e.tool_use_id, e.final_input) for e in ends] == [
        ("toolu_1", {"a": 1}),
        ("toolu_2", {}),
    ]
    assert final(events).stop_reason.kind is StopKind.TOOL_USE
    assert warns.calls == []


def test_tool_input_given_whole_at_block_start() -> None:
    events, _ = run_stream(
        [
            start(),
            block_start(0, type="tool_use", id="toolu_1", name="f", input={"x": [1, 2]}),
            stop(0),
            MESSAGE_STOP,
        ]
    )
    (end,) = [e for e in events if isinstance(e, ToolUseEnd)]
    assert end.final_input == {"x": [1, 2]}
    assert not any(isinstance(e, ToolUseInputDelta) for e in events)


def test_server_blocks_read_as_canonical_blocks() -> None:
    events, warns = run_stream(
        [
            start(),
            block_start(0, type="server_tool_use", id="srvtoolu_1", name="web_search", input={}),
            delta(0, type="input_json_delta", partial_json='{"q": "x"}'),
            stop(0),
            block_start(1, type="web_search_tool_result", tool_use_id="srvtoolu_1", content=[]),
            delta(1, type="mystery_delta", stuff=1),
            stop(1),
            block_start(2, type="text", text=""),
            delta(2, type="text_delta", text="found it"),
            delta(2, type="citations_delta", citation={"type": "web_search_result_location"}),
            stop(2),
            message_delta("end_turn"),
            MESSAGE_STOP,
        ]
    )
    assert warns.types == ["mystery_delta"]
    call, result, text = final(events).final_content
    assert isinstance(call, ServerToolCallBlock) and call.input == {"q": "x"}
    assert call.id == "srvtoolu_1" and call.name == "web_search"
    assert isinstance(result, ServerToolResultBlock) and result.search_results == []
    assert result.tool_call_id == "srvtoolu_1" and result.name == "web_search"
    assert isinstance(text, TextBlock) and text.text == "found it"
    assert text.citations is not None and text.citations[0].kind == "url"
    assert [e.content_block_index for e in events if isinstance(e, TextDelta)] == [2]


def test_unknown_delta_on_known_block_warns_once() -> None:
    events, warns = run_stream(
        [
            start(),
            block_start(0, type="text", text=""),
            delta(0, type="text_delta", text="a"),
            delta(0, type="sparkle_delta", x=1),
            delta(0, type="sparkle_delta", x=2),
            stop(0),
            MESSAGE_STOP,
        ]
    )
    assert warns.types == ["sparkle_delta"]
    assert final(events).final_content == [TextBlock(text="a")]


def test_unknown_event_types_are_ignored() -> None:
    events, warns = run_stream(
        [start(), {"type": "future_event", "x": 1}, {"type": "ping"}, MESSAGE_STOP]
    )
    assert final(events).final_content == []
    assert warns.calls == []


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("end_turn", StopKind.END_TURN),
        ("max_tokens", StopKind.MAX_TOKENS),
        ("stop_sequence", StopKind.STOP_SEQUENCE),
        ("tool_use", StopKind.TOOL_USE),
        ("pause_turn", StopKind.PAUSE_TURN),
        ("refusal", StopKind.REFUSAL),
        ("model_context_window_exceeded", StopKind.MAX_TOKENS),
    ],
)
def test_stop_reasons(raw: str, kind: StopKind) -> None:
    events, _ = run_stream([start(), message_delta(raw), MESSAGE_STOP])
    assert final(events).stop_reason.kind is kind
    assert final(events).stop_reason.raw == raw


def test_null_stop_reason_leaves_it_unset() -> None:
    builder, _ = new_builder()
    parser = codec.stream_parser(builder)
    parser.feed(start())
    parser.feed(message_delta(None, output_tokens=3))
    assert builder.stop_reason is None
    assert builder.token_usage().output_tokens == 3


def test_message_delta_usage_updates_only_present_fields() -> None:
    events, _ = run_stream(
        [
            start(input_tokens=100, output_tokens=1, cache_creation_input_tokens=50),
            message_delta("end_turn", output_tokens=42),
            MESSAGE_STOP,
        ]
    )
    usage = final(events).usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_creation_input_tokens) == (
        100,
        42,
        50,
    )


def test_in_stream_error_raises_overloaded() -> None:
    builder, _ = new_builder()
    parser = codec.stream_parser(builder)
    parser.feed(start())
    parser.feed(block_start(0, type="text", text=""))
    parser.feed(delta(0, type="text_delta", text="partial"))
    with pytest.raises(OverloadedError) as info:
        parser.feed(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        )
    assert info.value.provider_status is None
    assert info.value.provider_code == "overloaded_error"
    assert info.value.retryable


@pytest.mark.parametrize(
    ("error", "cls"),
    [
        ({"type": "api_error", "message": "Internal"}, ServerError),
        ({"type": "rate_limit_error", "message": "slow down"}, RateLimitError),
        ({"type": "invalid_request_error", "message": "prompt is too long"}, ContextOverflowError),
        ({"type": "brand_new_error", "message": "?"}, ServerError),
        (None, ServerError),
    ],
)
def test_in_stream_error_classes(error: Any, cls: type[Exception]) -> None:
    parser = codec.stream_parser(new_builder()[0])
    parser.feed(start())
    with pytest.raises(cls):
        parser.feed({"type": "error", "error": error})


def test_stream_without_message_stop_is_a_protocol_error() -> None:
    builder, _ = new_builder()
    parser = codec.stream_parser(builder)
    parser.feed(start())
    parser.feed(block_start(0, type="text", text=""))
    parser.feed(delta(0, type="text_delta", text="cut"))
    with pytest.raises(ProtocolError, match="before message_stop"):
        parser.end()
    assert not builder.completed


def test_malformed_message_start_raises_protocol_error() -> None:
    parser = codec.stream_parser(new_builder()[0])
    with pytest.raises(ProtocolError, match="anthropic sent a malformed input_tokens"):
        parser.feed(
            {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": "many"}}}
        )


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"type": "content_block_delta", "index": 0}, "content_block_delta.delta is missing"),
        (
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
            "text_delta.text is missing",
        ),
        (
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}},
            "text_delta.text: expected a string, got int 5",
        ),
        (
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}},
            "content_block_delta.index is missing",
        ),
        (
            {"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta"}},
            "content_block_delta.index: expected a whole number, got string '0'",
        ),
        (
            {"type": "content_block_delta", "index": 0, "delta": "text"},
            "content_block_delta.delta: expected an object, got string 'text'",
        ),
        ({"type": "content_block_start", "index": 1}, "content_block_start.content_block is"),
        (
            {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use"}},
            "content_block.id is missing",
        ),
        (
            {"type": "content_block_start", "index": 1, "content_block": {"type": 7}},
            "content_block.type: expected a string, got int 7",
        ),
        (
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "redacted_thinking"},
            },
            "content_block.data is missing",
        ),
        ({"type": "content_block_stop", "index": [0]}, "content_block_stop.index: expected a"),
        ({"type": "message_start"}, "message_start.message is missing"),
        ({"type": "message_delta"}, "message_delta.delta is missing"),
        (
            {"type": "message_delta", "delta": {}, "usage": [1]},
            r"message_delta.usage: expected an object, got list \[1\]",
        ),
        (
            {"type": "message_delta", "delta": {"stop_reason": {}}},
            "message_delta.delta.stop_reason: expected a string, got object",
        ),
        ({"no_type": True}, "event.type is missing"),
    ],
)
def test_malformed_objects_raise_protocol_error_naming_the_field(
    obj: dict[str, Any], problem: str
) -> None:
    parser = codec.stream_parser(new_builder()[0])
    parser.feed(start())
    parser.feed(block_start(0, type="text", text=""))
    with pytest.raises(ProtocolError, match=problem) as caught:
        parser.feed(obj)
    assert type(caught.value) is ProtocolError


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"id": 5}, "message_start.message.id: expected a string, got int 5"),
        ({"id": "m", "model": ["x"]}, "message_start.message.model: expected a string"),
        ({"id": "m", "content": {"a": 1}}, "message_start.message.content: expected a list"),
        ({"id": "m", "content": ["hi"]}, r"message_start.message.content\[\]: expected an obj"),
    ],
)
def test_malformed_message_start_names_the_field(message: dict[str, Any], problem: str) -> None:
    parser = codec.stream_parser(new_builder()[0])
    with pytest.raises(ProtocolError, match=problem):
        parser.feed({"type": "message_start", "message": message})


# Real recordings ---------------------------------------------------------------------------


def test_recorded_thinking_stream() -> None:
    (response,) = load("test_anthropic__test_anthropic_model_thinking_part_stream")
    events, warns = run_stream(sse_objects(response["body"]["string"]))
    done = final(events)
    thinking, text = done.final_content
    assert isinstance(thinking, ThinkingBlock) and isinstance(text, TextBlock)
    assert thinking.thinking and thinking.signature and thinking.signature.startswith("E")
    assert text.text.strip()
    assert done.message_id == "msg_01ALwQ87pTS7hH1PjSdC9wJD"
    assert done.usage.input_tokens == 43 and done.usage.output_tokens == 282
    assert done.stop_reason.raw == "end_turn"
    assert warns.calls == []


def test_recorded_redacted_thinking_stream() -> None:
    (response,) = load("test_anthropic__test_anthropic_model_thinking_part_redacted_stream")
    events, warns = run_stream(sse_objects(response["body"]["string"]))
    content = final(events).final_content
    assert [b.type for b in content] == ["redacted_thinking", "redacted_thinking", "text"]
    assert isinstance(content[0], RedactedThinkingBlock) and content[0].data.startswith("EqkE")
    assert final(events).usage.output_tokens == 189
    assert warns.calls == []


def test_recorded_tool_search_stream() -> None:
    first, second = load("test_tool_search__test_anthropic_native_tool_search_streaming")
    events, warns = run_stream(sse_objects(first["body"]["string"]))
    done = final(events)
    assert warns.types == []
    kinds = [b.type for b in done.final_content]
    assert kinds[:3] == ["text", "server_tool_call", "server_tool_result"]
    (tool,) = [b for b in done.final_content if isinstance(b, ToolUseBlock)]
    assert tool.id == "toolu_01EFn5wTNBYA8Reni8rbmnHT" and tool.name == "get_exchange_rate"
    assert tool.input == {"from_currency": "USD", "to_currency": "EUR"}
    assert done.stop_reason.kind is StopKind.TOOL_USE
    assert done.usage.input_tokens == 1591 and done.usage.output_tokens == 175
    events, _ = run_stream(sse_objects(second["body"]["string"]))
    assert final(events).stop_reason.raw == "end_turn"


def test_recorded_web_fetch_stream() -> None:
    (response,) = load("test_anthropic__test_anthropic_web_fetch_tool_stream")
    events, warns = run_stream(sse_objects(response["body"]["string"]))
    assert warns.types == []
    kinds = [b.type for b in final(events).final_content]
    assert kinds == ["thinking", "server_tool_call", "server_tool_result", "text"]
    fetched = final(events).final_content[2]
    assert isinstance(fetched, ServerToolResultBlock) and fetched.search_results
    assert fetched.search_results[0].url == "https://ai.pydantic.dev"
    assert (fetched.search_results[0].snippet or "").startswith("Pydantic AI")
    usage = final(events).usage
    assert (usage.input_tokens, usage.output_tokens) == (7244, 153)
    assert (usage.cached_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


def test_recorded_mcp_stream() -> None:
    (response,) = load("test_anthropic__test_anthropic_mcp_servers_stream")
    events, warns = run_stream(sse_objects(response["body"]["string"]))
    assert warns.types == [] and _opaque(final(events)) == ["mcp_tool_use", "mcp_tool_result"]
    assert _canonical(final(events)) == ["thinking", "text"]


def test_recorded_advisor_stream_uses_final_cumulative_usage() -> None:
    (response,) = load("test_anthropic__test_anthropic_advisor_tool_stream")
    events, warns = run_stream(sse_objects(response["body"]["string"]))
    assert warns.types == []
    done = final(events)
    kinds = [b.type for b in done.final_content]
    assert kinds == ["thinking", "text", "server_tool_call", "server_tool_result", "text"]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (2411, 145)


def _opaque(done: MessageComplete) -> list[str]:
    return [b.kind for b in done.final_content if isinstance(b, OpaqueBlock)]


def _canonical(done: MessageComplete) -> list[str]:
    return [b.type for b in done.final_content if not isinstance(b, OpaqueBlock)]


@pytest.mark.parametrize("name", stream_files())
def test_every_recorded_stream(name: str) -> None:
    for response in interactions(RECORDINGS / name):
        objs = sse_objects(response["response"]["body"]["string"])
        events, warns = run_stream(objs)
        foreign = [
            o["content_block"]["type"]
            for o in objs
            if o["type"] == "content_block_start"
            and o["content_block"]["type"] not in CANONICAL
            and not _server_block(o["content_block"]["type"])
        ]
        assert warns.types == [] and _opaque(final(events)) == foreign
        (raw_stop,) = [o["delta"]["stop_reason"] for o in objs if o["type"] == "message_delta"]
        assert final(events).stop_reason.raw == raw_stop
        assert final(events).final_content


def _server_block(kind: str) -> bool:
    """A server tool's call, or a result answering one (MCP's answer MCP calls: dropped)."""
    return kind == SERVER or (kind.endswith("_tool_result") and not kind.startswith("mcp_"))


# Non-streamed bodies -----------------------------------------------------------------------


def parse(body: dict[str, Any]) -> tuple[list[StreamEvent], Recorder]:
    builder, warns = new_builder()
    events = list(codec.parse_body(body, builder))
    check_invariants(events)
    return events, warns


def test_recorded_parallel_tool_calls_body() -> None:
    first, second = load("test_anthropic__test_multiple_parallel_tool_calls")
    events, _ = parse(first["parsed_body"])
    done = final(events)
    tools = [b for b in done.final_content if isinstance(b, ToolUseBlock)]
    assert [t.input["name"] for t in tools] == ["Alice", "Bob", "Charlie", "Daisy"]
    assert tools[0].id == "toolu_0167cfEnoQaPviGdVXA95zcu"
    assert isinstance(done.final_content[0], TextBlock)
    assert done.stop_reason.kind is StopKind.TOOL_USE
    assert (done.usage.input_tokens, done.usage.output_tokens) == (423, 202)
    assert done.message_id == "msg_011S3wxtqL5CVescWqS3zeg2"
    assert done.model == "claude-haiku-4-5-20251001"
    # Whole inputs come as tool_end's authoritative input, never as fragments.
    assert not any(isinstance(e, ToolUseInputDelta) for e in events)
    events, _ = parse(second["parsed_body"])
    assert final(events).stop_reason.raw == "end_turn"


def test_recorded_thinking_with_tool_body() -> None:
    first, _ = load("test_anthropic__test_anthropic_tool_with_thinking")
    events, _ = parse(first["parsed_body"])
    thinking, text, tool = final(events).final_content
    assert isinstance(thinking, ThinkingBlock) and thinking.signature
    assert thinking.signature == first["parsed_body"]["content"][0]["signature"]
    assert isinstance(text, TextBlock)
    assert isinstance(tool, ToolUseBlock) and tool.input == {}


def test_recorded_redacted_body_and_tool_output() -> None:
    for response in load("test_anthropic__test_anthropic_model_thinking_part_redacted"):
        events, _ = parse(response["parsed_body"])
        assert [b.type for b in final(events).final_content] == ["redacted_thinking", "text"]
    _, second = load("test_anthropic__test_anthropic_tool_output")
    events, _ = parse(second["parsed_body"])
    (tool,) = final(events).final_content
    assert isinstance(tool, ToolUseBlock)
    assert tool.input == {"city": "Mexico City", "country": "Mexico"}


def test_body_gives_the_same_events_as_the_stream() -> None:
    body = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "type": "message",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
            {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}},
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 6, "cache_read_input_tokens": 7},
    }
    from_body, body_warns = parse(body)
    from_stream, stream_warns = run_stream(
        [
            start(input_tokens=5, output_tokens=1, cache_read_input_tokens=7),
            block_start(0, type="thinking", thinking="", signature=""),
            delta(0, type="thinking_delta", thinking="hmm"),
            delta(0, type="signature_delta", signature="SIG"),
            stop(0),
            block_start(1, type="server_tool_use", id="srv", name="web_search", input={}),
            stop(1),
            block_start(2, type="text", text=""),
            delta(2, type="text_delta", text="hi"),
            stop(2),
            block_start(3, type="tool_use", id="toolu_1", name="f", input={"a": 1}),
            stop(3),
            message_delta("tool_use", output_tokens=6),
            MESSAGE_STOP,
        ]
    )
    assert from_body == from_stream
    assert body_warns.types == stream_warns.types == []


def test_error_body_raises_classified_error() -> None:
    builder, _ = new_builder()
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(OverloadedError):
        codec.parse_body(body, builder)


@pytest.mark.parametrize("error", [{"type": "error", "error": "boom"}, {"error": "boom"}])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_an_error_given_as_a_plain_string_keeps_its_words(error: Any, streamed: bool) -> None:
    # A proxy's {"error": "boom"}: "anthropic reported an error without a message", or
    # without its "type", "event.type is missing": what the provider said was lost.
    builder, _ = new_builder()
    with pytest.raises(ServerError, match="boom") as caught:
        if streamed:
            parser = codec.stream_parser(builder)
            parser.feed(start())
            parser.feed(error)
        else:
            codec.parse_body(error, builder)
    assert caught.value.provider_status is None


def test_malformed_body_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"message.content is missing"):
        codec.parse_body({"id": "m", "model": "x"}, new_builder()[0])
    with pytest.raises(ProtocolError, match=r"content_block.name is missing"):
        codec.parse_body({"content": [{"type": "tool_use", "id": "t"}]}, new_builder()[0])
    with pytest.raises(ProtocolError, match=r"message.content: expected a list, got object"):
        codec.parse_body({"content": {"type": "text"}}, new_builder()[0])
    with pytest.raises(ProtocolError, match=r"message.usage: expected an object, got int 3"):
        codec.parse_body({"content": [], "usage": 3}, new_builder()[0])


# HTTP errors -------------------------------------------------------------------------------


def error_body(kind: str, message: str = "msg", request_id: str | None = "req_b") -> bytes:
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("status", "kind", "message", "cls"),
    [
        (529, "overloaded_error", "Overloaded", ErrorClass.OVERLOADED),
        (429, "rate_limit_error", "slow", ErrorClass.RATE_LIMIT),
        (401, "authentication_error", "bad key", ErrorClass.AUTH),
        (403, "permission_error", "no", ErrorClass.AUTH),
        (413, "request_too_large", "too big", ErrorClass.CONTEXT_OVERFLOW),
        (400, "invalid_request_error", "bad param", ErrorClass.INVALID_REQUEST),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ErrorClass.CONTEXT_OVERFLOW,
        ),
        (404, "not_found_error", "model: x", ErrorClass.INVALID_REQUEST),
        (500, "api_error", "Internal server error", ErrorClass.SERVER_ERROR),
        (504, "timeout_error", "timeout", ErrorClass.SERVER_ERROR),
        (503, "some_new_error", "?", ErrorClass.SERVER_ERROR),
        (418, "some_new_error", "?", ErrorClass.INVALID_REQUEST),
    ],
)
def test_http_error_types(status: int, kind: str, message: str, cls: ErrorClass) -> None:
    error = codec.error_from_http(status, {}, error_body(kind, message))
    assert error.error_class is cls
    assert error.provider_status == status
    assert error.provider_code == kind
    assert error.provider_message == message
    assert error.request_id == "req_b"
    assert error.provider is None  # the normalize stage names the configured provider


def test_html_502_page() -> None:
    body = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    error = codec.error_from_http(502, {}, body)
    assert isinstance(error, ServerError)
    assert "502 Bad Gateway" in error.message
    assert error.provider_code is None


def test_empty_bodies() -> None:
    error = codec.error_from_http(529, {}, b"")
    assert isinstance(error, OverloadedError) and error.retryable
    assert "empty body" in error.message
    assert isinstance(codec.error_from_http(500, {}, b""), ServerError)
    assert isinstance(codec.error_from_http(401, {}, b"{}"), AuthError)


def test_retry_after_and_request_id_header() -> None:
    headers = {"Retry-After": "7", "Request-Id": "req_hdr"}
    error = codec.error_from_http(429, headers, error_body("rate_limit_error", request_id=None))
    assert isinstance(error, RateLimitError)
    assert error.retry_after_seconds == 7.0
    assert error.request_id == "req_hdr"


def test_recorded_error_bodies() -> None:
    (response,) = load("test_anthropic__test_anthropic_count_tokens_error")
    body = json.dumps(response["parsed_body"]).encode()
    error = codec.error_from_http(404, {}, body)
    assert isinstance(error, InvalidRequestError)
    assert error.provider_code == "not_found_error"
    assert error.request_id == "req_011CVEA3SF7rnb3DuBZytqQa"
    (response,) = load(
        "test_anthropic__test_anthropic_explicit_effort_xhigh_unsupported_model_errors"
    )
    error = codec.error_from_http(400, {}, json.dumps(response["parsed_body"]).encode())
    assert isinstance(error, InvalidRequestError)
    assert "xhigh" in error.provider_message


@pytest.mark.parametrize("calls", [True, False])
def test_a_null_stop_reason_is_tool_use_when_tools_were_called(calls: bool) -> None:
    """A compatible server that leaves ``stop_reason`` null (the stream's message_stop, or a
    whole body, says the reply is whole): the tools it called are to be run, as a Chat stream
    ended by ``[DONE]`` alone is read (docs/contract.md section 3). It was ``end_turn`` even
    with tool calls, which an agent loop takes as the end and runs none of them."""
    tool = [
        block_start(1, type="tool_use", id="toolu_1", name="get_weather", input={}),
        delta(1, type="input_json_delta", partial_json='{"city": "Paris"}'),
        stop(1),
    ]
    events, _ = run_stream(
        [
            start(input_tokens=5),
            block_start(0, type="text", text=""),
            delta(0, type="text_delta", text="Checking."),
            stop(0),
            *(tool if calls else []),
            message_delta(None, output_tokens=9),
            MESSAGE_STOP,
        ]
    )
    expected = StopKind.TOOL_USE if calls else StopKind.END_TURN
    assert final(events).stop_reason.kind is expected
    content: list[dict[str, Any]] = [{"type": "text", "text": "Checking."}]
    if calls:
        content.append({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}})
    body = {"id": "msg_1", "model": "m", "content": content, "stop_reason": None, "usage": {}}
    builder, _ = new_builder()
    whole = final(list(codec.parse_body(body, builder)))
    assert whole.stop_reason.kind is expected and not whole.stop_reason.raw
