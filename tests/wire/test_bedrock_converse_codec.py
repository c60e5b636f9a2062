"""The Bedrock Converse codec, sans-IO: encoding, stream and body parsing, AWS errors."""

from __future__ import annotations

import base64
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
    Base64ImageSource,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.events import (
    MessageComplete,
    StreamEvent,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.response import StopKind
from metis.wire.bedrock_converse import codec
from metis.wire.builder import MessageBuilder
from tests.helpers import make_call

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
PNG = base64.b64encode(b"\x89PNG fake").decode()


def request(messages: list[Message], **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model="bedrock:us.anthropic.claude-sonnet-4-5",
        messages=messages,
        max_output_tokens=99,
        **fields,
    )


def encode(req: CanonicalRequest) -> dict[str, Any]:
    return codec.encode(req, make_call(provider="bedrock", model=req.model))


def test_a_conversation_with_tools_encodes_as_converse() -> None:
    body = encode(
        request(
            [
                Message(role=Role.SYSTEM, content=[TextBlock(text="Be brief.")]),
                Message.user("Weather in Paris?"),
                Message(
                    role=Role.ASSISTANT,
                    content=[
                        ThinkingBlock(thinking="need the tool", signature="sig=="),
                        TextBlock(text="Checking."),
                        ToolUseBlock(id="tooluse_1", name="get_weather", input={"city": "Paris"}),
                    ],
                ),
                Message(
                    role=Role.USER,
                    content=[
                        ToolResultBlock(tool_use_id="tooluse_1", content="18C", is_error=False)
                    ],
                ),
                Message.user("And then?"),
            ],
            system_prompt="You are a forecaster.",
            tools=[WEATHER],
            tool_choice=ToolChoice(type="tool", name="get_weather"),
            temperature=1.0,  # with thinking on, Claude takes only 1
            stop_sequences=["END"],
            thinking=ThinkingConfig(budget_tokens=1024),
        )
    )
    assert "model" not in body  # the model is in the URL
    assert body["system"] == [{"text": "You are a forecaster.\n\nBe brief."}]
    assert body["inferenceConfig"] == {
        "maxTokens": 99,
        "temperature": 1.0,
        "stopSequences": ["END"],
    }
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "description": "Weather",
                    "inputSchema": {"json": WEATHER.input_schema},
                }
            }
        ],
        "toolChoice": {"tool": {"name": "get_weather"}},
    }
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "reasoningContent": {
                        "reasoningText": {"text": "need the tool", "signature": "sig=="}
                    }
                },
                {"text": "Checking."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_1",
                        "content": [{"text": "18C"}],
                        "status": "success",
                    }
                },
                {"text": "And then?"},
            ],
        },
    ]


def test_errors_images_blanks_and_unsigned_reasoning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "metis")
    body = encode(
        request(
            [
                Message(
                    role=Role.USER,
                    content=[
                        TextBlock(text="  "),
                        ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
                        ImageBlock(source=URLImageSource(url="https://example.test/a.png")),
                        TextBlock(text="what is it?"),
                    ],
                ),
                Message(
                    role=Role.ASSISTANT,
                    content=[
                        ThinkingBlock(thinking="from elsewhere"),
                        RedactedThinkingBlock(data="cmVkYWN0ZWQ="),
                        ToolUseBlock(id="t1", name="get_weather", input={}),
                    ],
                ),
                Message(
                    role=Role.USER,
                    content=[ToolResultBlock(tool_use_id="t1", content="", is_error=True)],
                ),
            ],
            tools=[WEATHER],
            tool_choice=ToolChoice(type="any"),
        )
    )
    user, assistant, result = body["messages"]
    assert user["content"] == [
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"text": "what is it?"},
    ]
    assert assistant["content"][0] == {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}}
    assert result["content"][0]["toolResult"]["status"] == "error"
    assert result["content"][0]["toolResult"]["content"] == [{"text": "(no output)"}]
    assert body["toolConfig"]["toolChoice"] == {"any": {}}
    dropped = sorted(r.block_type for r in caplog.records if hasattr(r, "block_type"))
    assert dropped == ["image", "thinking"]


def test_tool_choice_none_sends_no_tools_unless_the_history_needs_them() -> None:
    """Converse's toolChoice has no ``none``: with no tools the model cannot call one, so none
    is honoured; a history with tool blocks needs the tools (a toolConfig), so then the model
    may call one and ``tool_choice`` is reported dropped."""
    none = ToolChoice(type="none")
    quiet = make_call(provider="bedrock", model="bedrock:m")
    body = codec.encode(request([Message.user("hi")], tools=[WEATHER], tool_choice=none), quiet)
    assert "toolConfig" not in body and quiet.warnings == []
    history = [
        Message.user("hi"),
        Message(role=Role.ASSISTANT, content=[ToolUseBlock(id="t1", name="get_weather")]),
        Message(role=Role.USER, content=[ToolResultBlock(tool_use_id="t1", content="ok")]),
    ]
    call = make_call(provider="bedrock", model="bedrock:m")
    body = codec.encode(request(history, tools=[WEATHER], tool_choice=none), call)
    assert "toolChoice" not in body["toolConfig"] and body["toolConfig"]["tools"]
    assert [(w.block_type, w.message_id) for w in call.warnings] == [("tool_choice", None)]
    assert "none" in call.warnings[0].reason


def feed(objs: list[dict[str, Any]], end: bool = True) -> list[StreamEvent]:
    """The events feeding ``objs`` (then ending the stream, if ``end``) returned."""
    parser = codec.stream_parser(MessageBuilder("bedrock", "m"))
    events = [event for obj in objs for event in parser.feed(obj)]
    if end:
        events += parser.end()
    return events


def delta(index: int, value: dict[str, Any]) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": value}}


def final(events: list[StreamEvent]) -> MessageComplete:
    last = events[-1]
    assert isinstance(last, MessageComplete)
    return last


def test_a_streamed_parallel_tool_call_with_split_arguments() -> None:
    events = feed(
        [
            {"messageStart": {"role": "assistant"}},
            delta(0, {"text": "Let me check."}),
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {
                "contentBlockStart": {
                    "contentBlockIndex": 1,
                    "start": {"toolUse": {"toolUseId": "tooluse_a", "name": "get_weather"}},
                }
            },
            delta(1, {"toolUse": {"input": '{"ci'}}),
            delta(1, {"toolUse": {"input": 'ty": "Paris"}'}}),
            {"contentBlockStop": {"contentBlockIndex": 1}},
            {
                "contentBlockStart": {
                    "contentBlockIndex": 2,
                    "start": {"toolUse": {"toolUseId": "tooluse_b", "name": "now"}},
                }
            },
            {"contentBlockStop": {"contentBlockIndex": 2}},
            {"messageStop": {"stopReason": "tool_use"}},
            {
                "metadata": {
                    "usage": {
                        "inputTokens": 10,
                        "outputTokens": 20,
                        "cacheReadInputTokens": 4,
                        "cacheWriteInputTokens": 2,
                    },
                    "metrics": {"latencyMs": 1},
                }
            },
        ]
    )
    done = final(events)
    assert [type(e).__name__ for e in events].count("ToolUseInputDelta") == 2
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    assert [(e.tool_use_id, e.final_input) for e in ends] == [
        ("tooluse_a", {"city": "Paris"}),
        ("tooluse_b", {}),
    ]
    assert any(isinstance(e, ToolUseStart) for e in events)
    assert any(isinstance(e, ToolUseInputDelta) for e in events)
    assert done.stop_reason.kind is StopKind.TOOL_USE
    usage = done.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.cache_creation_input_tokens,
    ) == (10, 20, 4, 2)
    assert [b.type for b in done.final_content] == ["text", "tool_use", "tool_use"]


def test_reasoning_with_signature_and_redacted_reasoning_stream() -> None:
    events = feed(
        [
            {"messageStart": {"role": "assistant"}},
            delta(0, {"reasoningContent": {"text": "Think"}}),
            delta(0, {"reasoningContent": {"text": "ing."}}),
            delta(0, {"reasoningContent": {"signature": "c2ln"}}),
            {"contentBlockStop": {"contentBlockIndex": 0}},
            delta(1, {"reasoningContent": {"redactedContent": "cmVk"}}),
            delta(2, {"text": ""}),
            delta(2, {"text": "Done."}),
            {"messageStop": {"stopReason": "end_turn"}},
            {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 2}}},
        ]
    )
    content = final(events).final_content
    assert [b.type for b in content] == ["thinking", "redacted_thinking", "text"]
    assert content[0].thinking == "Thinking." and content[0].signature == "c2ln"  # type: ignore[union-attr]
    assert content[1].data == "cmVk"  # type: ignore[union-attr]


def test_a_streamed_negative_count_makes_the_usage_estimated() -> None:
    # The event stream's frames are not rewritten in tests/adapter; its metadata event is here.
    events = feed(
        [
            {"messageStart": {"role": "assistant"}},
            delta(0, {"text": "Done."}),
            {"messageStop": {"stopReason": "end_turn"}},
            {"metadata": {"usage": {"inputTokens": 5, "outputTokens": -9}}},
        ]
    )
    ended = final(events)
    assert ended.final_content[0].text == "Done."  # type: ignore[union-attr]
    assert ended.usage.estimated and ended.usage.input_tokens == 0
    assert ended.stop_reason.kind is StopKind.END_TURN


def test_a_guardrail_stop_is_a_content_filter_and_unknown_reasons_are_kept_raw() -> None:
    """``model_context_window_exceeded`` (a Converse ``StopReason`` value: the reply was cut
    where the context filled) is ``max_tokens`` as on Anthropic's Messages API, so the same
    Claude reply ends the same way on either platform."""
    for raw, kind in [
        ("guardrail_intervened", StopKind.CONTENT_FILTER),
        ("model_context_window_exceeded", StopKind.MAX_TOKENS),
        ("malformed_model_output", StopKind.PROVIDER_SPECIFIC),
    ]:
        events = feed(
            [{"messageStart": {}}, {"messageStop": {"stopReason": raw}}, {"metadata": {}}]
        )
        stop = final(events).stop_reason
        assert (stop.kind, stop.raw) == (kind, raw)


def test_a_stream_cut_before_message_stop_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="before messageStop"):
        feed([{"messageStart": {}}, delta(0, {"text": "Hel"})])


def test_a_stream_without_metadata_ends_at_message_stop() -> None:
    events = feed(
        [
            {"messageStart": {}},
            delta(0, {"text": "Hi"}),
            {"messageStop": {"stopReason": "end_turn"}},
        ]
    )
    assert final(events).stop_reason.kind is StopKind.END_TURN


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        (delta(0, {"text": 5}), "contentBlockDelta.delta.text: expected a string, got int 5"),
        (
            {"contentBlockDelta": {"delta": {"text": "x"}}},
            "contentBlockDelta.contentBlockIndex is missing",
        ),
        ({"contentBlockDelta": [1]}, "contentBlockDelta: expected an object, got list"),
        (
            {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"name": "x"}}}},
            "contentBlockStart.start.toolUse.toolUseId is missing",
        ),
        (
            {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": "x"}}},
            "contentBlockStart.start.toolUse: expected an object, got string",
        ),
        ({"contentBlockStop": {"contentBlockIndex": 0.5}}, "contentBlockStop.contentBlockIndex"),
        ({"messageStop": {}}, "messageStop.stopReason is missing"),
        ({"metadata": {"usage": "none"}}, "metadata.usage: expected an object, got string"),
        (
            delta(0, {"reasoningContent": {"redactedContent": "not base64!"}}),
            "reasoningContent.redactedContent: expected base64 text",
        ),
        (
            delta(0, {"toolUse": {"input": {"a": 1}}}),
            "contentBlockDelta.delta.toolUse.input: expected a string, got object",
        ),
    ],
)
def test_malformed_events_are_protocol_errors_naming_the_field(
    obj: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ProtocolError, match=problem) as caught:
        feed([{"messageStart": {}}, obj], end=False)
    assert type(caught.value) is ProtocolError


def test_unknown_events_and_deltas_are_ignored() -> None:
    events = feed(
        [
            {"messageStart": {}},
            {"somethingNew": {"x": 1}},
            delta(0, {"citation": {"x": 1}}),
            delta(0, {"text": "ok"}),
            {"messageStop": {"stopReason": "end_turn"}},
        ]
    )
    assert [b.type for b in final(events).final_content] == ["text"]


def test_a_whole_body_with_reasoning_text_and_tool_use() -> None:
    events = codec.parse_body(
        {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [
                        {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "s"}}},
                        {"reasoningContent": {"redactedContent": "cmVk"}},
                        {"text": "Calling."},
                        {
                            "toolUse": {
                                "toolUseId": "tooluse_x",
                                "name": "get_weather",
                                "input": {"city": "Oslo"},
                            }
                        },
                        {"image": {"format": "png"}},
                    ],
                }
            },
            "stopReason": "tool_use",
            "usage": {"inputTokens": 5, "outputTokens": 6, "totalTokens": 11},
        },
        MessageBuilder("bedrock", "m"),
    )
    done = final(list(events))
    assert [b.type for b in done.final_content] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
        "opaque",  # an image has no canonical form in a reply: kept whole (§8)
    ]
    assert done.final_content[3].input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (5, 6)


def test_a_body_without_output_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"response.output is missing"):
        codec.parse_body({"stopReason": "end_turn"}, MessageBuilder("bedrock", "m"))
    body = {"output": {"message": {"content": [{"toolUse": {"toolUseId": "t", "input": "x"}}]}}}
    with pytest.raises(ProtocolError, match=r"content\[\].toolUse.input: expected an object"):
        codec.parse_body(body, MessageBuilder("bedrock", "m"))


@pytest.mark.parametrize(
    ("status", "headers", "body", "error_type", "code"),
    [
        (
            429,
            {
                "x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"
            },
            {"message": "slow down"},
            RateLimitError,
            "ThrottlingException",
        ),
        (
            503,
            {},
            {"__type": "com.amazon.coral#ServiceUnavailableException", "message": "busy"},
            OverloadedError,
            "ServiceUnavailableException",
        ),
        (
            424,
            {"x-amzn-ErrorType": "ModelErrorException"},
            {"message": "model failed"},
            ServerError,
            "ModelErrorException",
        ),
        (
            403,
            {"x-amzn-ErrorType": "AccessDeniedException"},
            {"Message": "no access"},
            AuthError,
            "AccessDeniedException",
        ),
        (
            403,
            {"x-amzn-ErrorType": "UnrecognizedClientException"},
            {"message": "The security token included in the request is invalid."},
            AuthError,
            "UnrecognizedClientException",
        ),
        (
            400,
            {"x-amzn-ErrorType": "ValidationException"},
            {"message": "The provided model identifier is invalid."},
            InvalidRequestError,
            "ValidationException",
        ),
        (
            400,
            {"x-amzn-ErrorType": "ValidationException"},
            {"message": "Input is too long for requested model."},
            ContextOverflowError,
            "ValidationException",
        ),
        (
            400,
            {},
            {"message": "The provided model identifier is invalid."},
            InvalidRequestError,
            None,
        ),
    ],
)
def test_http_errors_are_classified_by_exception_type(
    status: int, headers: dict[str, str], body: dict[str, Any], error_type: type, code: str | None
) -> None:
    error = codec.error_from_http(status, headers, json.dumps(body).encode())
    assert type(error) is error_type
    assert error.provider_code == code and error.provider_status == status
    assert error.message == (body.get("message") or body.get("Message"))


def test_a_service_quota_is_a_rate_limit_that_is_not_retried() -> None:
    error = codec.error_from_http(400, {"x-amzn-ErrorType": "ServiceQuotaExceededException"}, b"{}")
    assert error.error_class is ErrorClass.RATE_LIMIT and not error.retryable


def test_an_html_error_page_is_summarized() -> None:
    error = codec.error_from_http(502, {}, b"<html><title>Bad Gateway</title></html>")
    assert error.error_class is ErrorClass.SERVER_ERROR and "Bad Gateway" in error.message


def test_the_stop_sequence_the_model_names_is_kept_and_asked_for_only_with_stop_sequences() -> None:
    named = {"additionalModelResponseFields": {"stop_sequence": "END"}}
    stopped = {"stopReason": "stop_sequence", **named}
    events = feed([{"messageStart": {}}, delta(0, {"text": "ok"}), {"messageStop": stopped}])
    reason = final(events).stop_reason
    assert (reason.kind, reason.sequence) == (StopKind.STOP_SEQUENCE, "END")
    body = {"output": {"message": {"role": "assistant", "content": []}}, **stopped}
    assert final(list(codec.parse_body(body, MessageBuilder("bedrock", "m")))).stop_reason == reason
    unnamed = {"stopReason": "stop_sequence"}  # a model that does not say which
    events = feed([{"messageStart": {}}, {"messageStop": unnamed}])
    assert final(events).stop_reason.sequence is None
    with pytest.raises(ProtocolError, match=r"additionalModelResponseFields.stop_sequence"):
        feed(
            [
                {"messageStart": {}},
                {"messageStop": {**unnamed, "additionalModelResponseFields": {"stop_sequence": 1}}},
            ],
            end=False,
        )
    hello = [Message(role=Role.USER, content=[TextBlock(text="Hi")])]
    assert encode(request(hello, stop_sequences=["END"]))["additionalModelResponseFieldPaths"] == [
        "/stop_sequence"
    ]
    assert "additionalModelResponseFieldPaths" not in encode(request(hello))


@pytest.mark.parametrize("extra", ["anything", 3, ["a"], None])
def test_model_response_fields_that_are_not_an_object_are_no_error(extra: Any) -> None:
    """AWS types additionalModelResponseFields as a document (any JSON value); a reply whose
    fields are a string still reads, naming no stop sequence."""
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Lima."}]}},
        "stopReason": "max_tokens",
        "usage": {"inputTokens": 9, "outputTokens": 2, "totalTokens": 11},
        "additionalModelResponseFields": extra,
    }
    done = final(list(codec.parse_body(body, MessageBuilder("bedrock", "m"))))
    assert done.final_content == [TextBlock(text="Lima.")]
    assert (done.stop_reason.kind, done.stop_reason.sequence) == (StopKind.MAX_TOKENS, None)
    stopped = {"stopReason": "end_turn", "additionalModelResponseFields": extra}
    events = feed([{"messageStart": {}}, delta(0, {"text": "Lima."}), {"messageStop": stopped}])
    assert final(events).stop_reason.kind is StopKind.END_TURN
