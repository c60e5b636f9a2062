"""The gateway's server-side codecs, without a server: each API's request read into the
canonical form, projection, and the reply, its stream and its errors written back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.catalog import default_catalog
from metis.catalog.knobs import reasoning_profile
from metis.core.ids import new_tool_id
from metis.errors import (
    CapabilityError,
    ContextOverflowError,
    InvalidRequestError,
    NetworkError,
    OverloadedError,
    RateLimitError,
    ServerError,
)
from metis.gateway.anthropic_api import read_messages
from metis.gateway.anthropic_write import MessageStream, write_message
from metis.gateway.chat_api import read_chat
from metis.gateway.chat_write import ChunkStream, write_completion
from metis.gateway.errors import (
    GatewayAuthError,
    GatewayTimeoutError,
    ModelNotFoundError,
    RequestTooLargeError,
    anthropic_error,
    openai_error,
)
from metis.gateway.inbound import Inbound
from metis.gateway.projection import project
from metis.gateway.responses_api import ResponseStream
from metis.gateway.responses_read import read_responses
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Role, TextBlock, ToolResultBlock, ToolUseBlock
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
from metis.model.request import ThinkingConfig, ToolChoice
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.model.server_tools import WebSearch
from metis.wire.anthropic.knobs import thinking_fields


def test_an_anthropic_request_reads_into_the_canonical_form() -> None:
    kept = new_tool_id()
    inbound = read_messages(
        {
            "model": "sonnet",
            "max_tokens": 512,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "x"}}],
            "messages": [
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": kept, "name": "w", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": kept, "content": "cold"}],
                },
            ],
            "tools": [
                {"name": "w", "input_schema": {"type": "object"}},
                {"type": "web_search_20250305", "name": "web_search"},
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "top_k": 3,
            "stream": True,
        }
    )
    assert inbound.model == "sonnet" and inbound.stream and inbound.max_output_tokens == 512
    roles = [m.role for m in inbound.messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL]
    call, result = inbound.messages[2].content[0], inbound.messages[3].content[0]
    assert isinstance(call, ToolUseBlock) and isinstance(result, ToolResultBlock)
    assert call.id == result.tool_use_id == kept  # a canonical id given out stays itself
    assert [t.name for t in inbound.fields["tools"]] == ["w"]
    assert inbound.fields["tool_choice"].type == "any"
    assert inbound.fields["parallel_tool_calls"] is False
    assert inbound.fields["thinking"] == ThinkingConfig(budget_tokens=2048)
    # cache_control is Anthropic's own: the routed stack's cache policy marks the request
    assert inbound.fields["top_k"] == 3  # the canonical request's own: sent where taken
    # a server tool metis has a form for: kept, and left out where the model has none
    assert inbound.fields["server_tools"] == [WebSearch()]
    assert inbound.ignored == ["system[0].cache_control"]


def test_foreign_tool_ids_get_one_canonical_id_per_request() -> None:
    inbound = read_chat(
        {
            "model": "gpt",
            "messages": [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "done"},
            ],
        }
    )
    call, result = inbound.messages[1].content[0], inbound.messages[2].content[0]
    assert isinstance(call, ToolUseBlock) and isinstance(result, ToolResultBlock)
    assert call.id.startswith("tu_") and call.id == result.tool_use_id


def test_a_chat_request_with_custom_tools_reads_them_as_freeform() -> None:
    grammar = {"type": "grammar", "grammar": {"syntax": "regex", "definition": "[a-z]+"}}
    call = {"id": "call_9", "type": "custom", "custom": {"name": "sh", "input": "ls -la"}}
    inbound = read_chat(
        {
            "model": "gpt",
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_9", "content": "a b"},
            ],
            "tools": [
                {"type": "custom", "custom": {"name": "sh", "format": {"type": "text"}}},
                {"type": "custom", "custom": {"name": "word", "format": grammar}},
            ],
            "tool_choice": {"type": "custom", "custom": {"name": "word"}},
        }
    )
    used = inbound.messages[1].content[0]
    assert isinstance(used, ToolUseBlock) and used.input == {"input": "ls -la"}
    sh, word = inbound.fields["tools"]
    assert sh.freeform is not None and sh.freeform.syntax is None
    assert word.freeform is not None and word.freeform.definition == "[a-z]+"
    assert inbound.fields["tool_choice"].name == "word"
    with pytest.raises(InvalidRequestError, match=r"tools\[0\].custom.format"):
        read_chat(
            {
                "model": "gpt",
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "custom", "custom": {"name": "sh", "format": {"type": "x"}}}],
            }
        )


def test_a_chat_request_reads_its_settings() -> None:
    schema = {"type": "object", "properties": {}}
    inbound = read_chat(
        {
            "model": "gpt",
            "messages": [{"role": "developer", "content": "sys"}, {"role": "user", "content": "u"}],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": "required",
            "stop": "END",
            "reasoning_effort": "low",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": schema},
            },
            "max_completion_tokens": 99,
            "stream_options": {"include_usage": True},
            "logprobs": True,
        }
    )
    assert inbound.fields["tool_choice"].type == "any"
    assert inbound.fields["stop_sequences"] == ["END"]
    assert inbound.fields["thinking"].effort == "low"
    assert inbound.fields["output_schema"] == schema
    assert inbound.max_output_tokens == 99 and inbound.options["include_usage"] is True
    assert inbound.ignored == ["logprobs"]


@pytest.mark.parametrize(
    ("reader", "body"),
    [
        (read_messages, {"max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]}),
        (read_chat, {"messages": [{"role": "user", "content": "Hi"}]}),
        (read_responses, {"input": "Hi"}),
    ],
)
def test_a_field_given_null_or_empty_is_not_reported_as_left_out(reader: Any, body: Any) -> None:
    """The OpenAI Agents SDK sends ``include: []`` with every Responses request: it asks for
    nothing, and the gateway reported it left out (a header and a warning per request)."""
    given = {"model": "m", **body, "include": [], "metadata": {}, "user": None, "logprobs": True}
    assert reader(given).ignored == ["logprobs"]


def test_a_responses_request_reads_its_items() -> None:
    inbound = read_responses(
        {
            "model": "gpt5",
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"a":1}'},
                {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {"type": "function_call_output", "call_id": "c2", "output": "two"},
            ],
            "reasoning": {"effort": "high"},
            "store": False,
        }
    )
    assert [m.role for m in inbound.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert len(inbound.messages[1].content) == 2 and len(inbound.messages[2].content) == 2
    assert inbound.fields["system_prompt"] == "Be brief."
    assert inbound.fields["thinking"].effort == "high"
    assert inbound.options["store"] is False and inbound.ignored == ["input[1] (reasoning)"]


@pytest.mark.parametrize(
    ("reader", "body", "named"),
    [
        (read_messages, {"messages": []}, "model"),
        (read_messages, {"model": "m", "max_tokens": "9", "messages": []}, "max_tokens"),
        (read_messages, {"model": "m", "messages": [{"role": "bot"}]}, "messages[0].role"),
        (read_messages, {"model": "m", "messages": [], "thinking": {"type": "on"}}, "thinking"),
        (read_chat, {"model": "m", "messages": [], "tools": [{"type": "function"}]}, "tools[0]"),
        (read_chat, {"model": "m", "messages": [], "stop": 3}, "stop"),
        (read_responses, {"model": "m", "input": 3}, "input"),
        (read_responses, {"model": "m", "input": [{"role": "user", "content": 1}]}, "input[0]"),
        (read_chat, [1, 2], "JSON object"),
    ],
)
def test_bad_requests_are_invalid_request_errors_naming_the_field(
    reader: Any, body: Any, named: str
) -> None:
    with pytest.raises(InvalidRequestError, match=named.replace("[", r"\[")):
        reader(body)


def test_projection_leaves_out_what_the_model_cannot_honour() -> None:
    inbound = Inbound(
        model="m",
        messages=[],
        max_output_tokens=100_000,
        fields={
            "thinking": ThinkingConfig(budget_tokens=2048),
            "output_schema": {"type": "object"},
            "stop_sequences": ["x"],
            "parallel_tool_calls": True,
        },
    )
    plain = AdapterCapabilities(max_output_tokens=8000, supports_stop_sequences=False)
    limit, changes, dropped = project(inbound, plain, "m")
    assert limit == 8000
    assert changes == {
        "thinking": None,
        "output_schema": None,
        "stop_sequences": [],
        "parallel_tool_calls": None,
    }
    assert len(dropped) == 5 and dropped[0] == "max_tokens lowered from 100000 to 8000"
    thinks = AdapterCapabilities(max_output_tokens=8000, supports_thinking=True)
    inbound.max_output_tokens = None  # the default comes from what the model can serve
    inbound.fields = {"thinking": ThinkingConfig(budget_tokens=16384)}
    limit, changes, dropped = project(inbound, thinks, "m")
    assert limit == 8000 and changes["thinking"].budget_tokens == 7999
    assert dropped == ["thinking budget lowered from 16384 to 7999"]
    inbound.fields = {"thinking": ThinkingConfig(budget_tokens=16384, display="omitted")}
    limit, changes, dropped = project(inbound, thinks, "m")  # the budget lowered, the display kept
    assert changes["thinking"] == ThinkingConfig(budget_tokens=7999, display="omitted")


LOW = ThinkingConfig(effort="low")


@pytest.mark.parametrize(
    ("model", "wire_model", "thinking", "left_out"),
    [
        ("claude-sonnet-4-5", "", ThinkingConfig(effort="low"), True),  # a budget model
        ("claude-sonnet-4-6", "", ThinkingConfig(budget_tokens=2048), True),  # a budget: manual
        ("claude-sonnet-4-6", "", ThinkingConfig(effort="low"), False),  # adaptive
        ("claude-opus-4-7", "", ThinkingConfig(budget_tokens=2048), False),  # adaptive only
        ("claude-sonnet-4-5", "", ThinkingConfig(effort="none"), False),
        ("claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", LOW, True),
        ("claude-opus-4-7", "claude-opus-4-7@20260101", ThinkingConfig(budget_tokens=2048), False),
    ],
)
def test_claude_manual_thinking_beside_a_forced_tool_is_left_out(
    model: str, wire_model: str, thinking: ThinkingConfig, left_out: bool
) -> None:
    # pydantic/pydantic-ai's test_openai_responses_streaming_usage: reasoning effort low and
    # tool_choice required, which the gateway refused on its way to claude-sonnet-4-5
    wire_model = wire_model or model
    profile = reasoning_profile(default_catalog().get("anthropic", model))
    caps = AdapterCapabilities(max_output_tokens=8000, supports_thinking=True, reasoning=profile)
    sent = thinking_fields(thinking, 4000, wire_model).get("thinking", {})
    assert (sent.get("type") == "enabled") == left_out  # the codec decides as the gateway asks
    for choice in (ToolChoice.any(), ToolChoice.tool("f"), ToolChoice.auto()):
        fields = {"thinking": thinking, "tool_choice": choice}
        inbound = Inbound(model="m", messages=[], max_output_tokens=4000, fields=fields)
        _, changes, dropped = project(inbound, caps, wire_model)
        gone = left_out and choice.type != "auto"
        assert ("thinking" in changes and changes["thinking"] is None) == gone
        assert any("manual thinking" in phrase for phrase in dropped) == gone


def _response(**changes: Any) -> CanonicalResponse:
    fields: dict[str, Any] = {
        "request_id": "r",
        "model": "x:y",
        "provider": "x",
        "content": [TextBlock(text="Hi"), ToolUseBlock(id="tu_1", name="f", input={"a": 1})],
        "stop_reason": StopReason(kind=StopKind.TOOL_USE),
        "usage": TokenUsage(input_tokens=3, cached_input_tokens=4, output_tokens=5),
        "latency_ms": 1,
    }
    return CanonicalResponse(**{**fields, **changes})


def test_replies_are_written_in_each_api() -> None:
    message = write_message(_response(), "sonnet")
    assert message["model"] == "sonnet" and message["stop_reason"] == "tool_use"
    assert message["content"][1] == {
        "type": "tool_use",
        "id": "tu_1",
        "name": "f",
        "input": {"a": 1},
    }
    assert message["usage"]["cache_read_input_tokens"] == 4
    completion = write_completion(_response(), "gpt")
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Hi"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a":1}'}
    assert completion["usage"]["prompt_tokens"] == 7  # uncached and cached input


EVENTS: list[StreamEvent] = [
    MessageStart(message_id="m", model="x"),
    ThinkingDelta(0, thinking="hmm"),
    ThinkingDelta(0, signature="sig"),
    TextDelta(1, "Hel"),
    TextDelta(1, "lo"),
    ToolUseStart(2, "tu_1", "f"),
    ToolUseInputDelta(2, "tu_1", '{"a":'),
    ToolUseInputDelta(2, "tu_1", "1}"),
    ToolUseEnd(2, "tu_1", "f", {"a": 1}),
    ToolUseStart(3, "tu_2", "g"),  # arguments only at the end, as some providers give them
    ToolUseEnd(3, "tu_2", "g", {"b": 2}),
    MessageComplete([], StopReason(kind=StopKind.TOOL_USE), TokenUsage(output_tokens=9)),
]


def _sse(written: bytes) -> list[tuple[str | None, Any]]:
    out = []
    for frame in written.decode().split("\n\n"):
        if not frame:
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        payload = lines["data"]
        out.append((lines.get("event"), payload if payload == "[DONE]" else json.loads(payload)))
    return out


def test_the_anthropic_stream() -> None:
    writer = MessageStream("sonnet")
    frames = _sse(b"".join(writer.feed(e) for e in EVENTS))
    names = [name for name, _ in frames]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 4
    deltas = [d["delta"] for n, d in frames if n == "content_block_delta"]
    assert {"type": "signature_delta", "signature": "sig"} in deltas
    inputs = [d for d in deltas if d["type"] == "input_json_delta"]
    # each tool block opens with an empty fragment, as the Messages API streams it
    assert [d["partial_json"] for d in inputs] == ["", '{"a":', "1}", "", '{"b":2}']
    assert frames[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert frames[-2][1]["usage"]["output_tokens"] == 9


def test_the_chat_stream() -> None:
    writer = ChunkStream("gpt", include_usage=True)
    frames = [data for _, data in _sse(b"".join(writer.feed(e) for e in EVENTS))]
    assert frames[-1] == "[DONE]" and frames[-2]["choices"] == []
    assert frames[-2]["usage"]["completion_tokens"] == 9
    assert frames[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [f["choices"][0]["delta"] for f in frames[:-2]]
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert [c["index"] for c in calls if "id" in c] == [0, 1]
    assert [c["function"]["arguments"] for c in calls if "id" not in c] == [
        '{"a":',
        "1}",
        '{"b":2}',
    ]
    assert frames[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(f["usage"] is None for f in frames[:-2])


def test_the_responses_stream() -> None:
    inbound = Inbound(model="gpt5", messages=[])
    writer = ResponseStream(inbound, "gpt5", "resp_1")
    frames = _sse(b"".join(writer.feed(e) for e in EVENTS))
    assert [d["sequence_number"] for _, d in frames] == list(range(len(frames)))
    names = [name for name, _ in frames]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names.count("response.output_item.added") == names.count("response.output_item.done")
    final = frames[-1][1]["response"]
    assert names[-1] == "response.completed" and final["status"] == "completed"
    kinds = [item["type"] for item in final["output"]]
    assert kinds == ["reasoning", "message", "function_call", "function_call"]
    assert final["output"][1]["content"][0]["text"] == "Hello"
    assert [i["arguments"] for i in final["output"][2:]] == ['{"a":1}', '{"b":2}']


def test_a_stream_that_fails_ends_with_the_apis_error_event() -> None:
    failed = anthropic_error(OverloadedError("busy"), "req_1")
    assert _sse(MessageStream("m").error(failed.status, failed.body))[0][0] == "error"
    writer = ResponseStream(Inbound(model="m", messages=[]), "m", "resp_1")
    body = openai_error(ServerError("down"), "req_1").body
    name, data = _sse(writer.error(500, body))[0]
    assert name == "response.failed" and data["response"]["error"]["message"] == "down"


@pytest.mark.parametrize(
    ("error", "status", "anthropic_type", "openai_code"),
    [
        (InvalidRequestError("x"), 400, "invalid_request_error", None),
        (CapabilityError("x"), 400, "invalid_request_error", "unsupported_value"),
        (ContextOverflowError("x"), 400, "invalid_request_error", "context_length_exceeded"),
        (GatewayAuthError("x"), 401, "authentication_error", "invalid_api_key"),
        (ModelNotFoundError("x"), 404, "not_found_error", "model_not_found"),
        (RequestTooLargeError("x"), 413, "request_too_large", "request_too_large"),
        (
            RateLimitError("x", retry_after_seconds=3),
            429,
            "rate_limit_error",
            "rate_limit_exceeded",
        ),
        (ServerError("x"), 500, "api_error", None),
        (NetworkError("x"), 502, "api_error", None),
        (GatewayTimeoutError("x"), 504, "timeout_error", "timeout"),
    ],
)
def test_each_error_class_keeps_its_status_and_shape(
    error: Any, status: int, anthropic_type: str, openai_code: str | None
) -> None:
    shaped = anthropic_error(error, "req_1")
    assert shaped.status == status and shaped.body["type"] == "error"
    assert shaped.body["error"] == {"type": anthropic_type, "message": "x"}
    assert shaped.body["request_id"] == shaped.headers["request-id"] == "req_1"
    openai_shaped = openai_error(error, "req_1")
    assert openai_shaped.status == status
    assert set(openai_shaped.body["error"]) == {"message", "type", "param", "code"}
    assert openai_shaped.body["error"]["code"] == openai_code
    if isinstance(error, RateLimitError):
        assert shaped.headers["retry-after"] == openai_shaped.headers["retry-after"] == "3"


@pytest.mark.parametrize("shape", [anthropic_error, openai_error])
def test_x_should_retry_says_what_the_error_says_where_the_sdks_retry_by_status(
    shape: Any,
) -> None:
    """An upstream's ``x-should-retry: false`` (or an exhausted quota) stops the caller's
    SDK from retrying what the gateway already knows will fail again."""
    assert shape(ServerError("x"), "r").headers["x-should-retry"] == "true"
    assert shape(ServerError("x", retryable=False), "r").headers["x-should-retry"] == "false"
    quota = RateLimitError("x", provider_code="insufficient_quota", retryable=False)
    assert shape(quota, "r").headers["x-should-retry"] == "false"
    assert shape(RateLimitError("x"), "r").headers["x-should-retry"] == "true"
    assert "x-should-retry" not in shape(InvalidRequestError("x"), "r").headers


def test_overloaded_is_529_for_anthropic_and_503_for_openai() -> None:
    assert anthropic_error(OverloadedError("x"), "r").status == 529
    assert openai_error(OverloadedError("x"), "r").status == 503


def test_the_maker_rides_in_the_signature_and_only_the_gateways_is_read() -> None:
    from metis.gateway.provenance import unwrap, wrap
    from metis.model.content import ProviderRaw

    maker = ProviderRaw(provider="gemini", model="gemini:gemini-2.5-flash")
    wrapped = wrap(maker, "c2lnbmF0dXJl")
    assert wrapped.startswith("metis1.") and unwrap(wrapped) == (maker, "c2lnbmF0dXJl")
    for given in ("plain-signature", "metis1.", "metis1.!!!.x", "metis1.WzFd.x", "metis1.e30"):
        assert unwrap(given) == (None, given)
    inbound = read_messages(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "t", "signature": wrapped}],
                },
            ],
        }
    )
    block = inbound.messages[1].content[0]
    assert block.provider_raw == maker and block.signature == "c2lnbmF0dXJl"  # type: ignore[union-attr]


def test_a_system_turn_among_the_messages_is_read_where_it_stands() -> None:
    inbound = read_messages(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "From now on, be brief."},
                {"role": "user", "content": "more"},
            ],
        }
    )
    assert [m.role for m in inbound.messages] == [Role.USER, Role.SYSTEM, Role.USER]
    assert inbound.messages[1].text == "From now on, be brief."


def test_adaptive_thinking_at_anthropics_effort_is_the_canonical_effort() -> None:
    """``output_config.effort`` sets adaptive thinking's level, which other models take as
    their reasoning effort; beside budgeted thinking, or none, it is left out and named (it
    was ignored without a word), as is a field of ``output_config`` the reader does not map."""
    said = [{"role": "user", "content": "Hi"}]

    def read(**more: Any) -> Inbound:
        return read_messages({"model": "m", "max_tokens": 9, "messages": said, **more})

    adaptive = {"type": "adaptive"}
    low = read(thinking=adaptive, output_config={"effort": "low"})
    assert low.fields["thinking"] == ThinkingConfig(effort="low") and not low.ignored
    assert read(thinking=adaptive).fields["thinking"] == ThinkingConfig(budget_tokens=8192)
    budgeted = read(
        thinking={"type": "enabled", "budget_tokens": 2048}, output_config={"effort": "high"}
    )
    assert budgeted.fields["thinking"] == ThinkingConfig(budget_tokens=2048)
    assert budgeted.ignored == ["output_config.effort"]
    alone = read(output_config={"effort": "high", "extra": 1})
    assert "thinking" not in alone.fields
    assert alone.ignored == ["output_config.effort", "output_config.extra"]
    with pytest.raises(InvalidRequestError, match=r"output_config\.effort"):
        read(thinking=adaptive, output_config={"effort": "extreme"})


def test_anthropics_refusal_to_thread_a_request_keeps_its_code_through_the_gateway() -> None:
    """Anthropic says a request it will not thread in ``error.details.error_code``, on which
    the SDK's tool runner sends the whole conversation: read as the error's code, and given on
    in the gateway's answer (the answer had only the error's type, and the runner failed)."""
    from metis.wire.anthropic.errors import error_from_http

    said = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "thread: not for this request",
            "details": {"error_code": "thread_unsupported_request"},
        },
    }
    read = error_from_http(400, {}, json.dumps(said).encode())
    assert isinstance(read, InvalidRequestError)
    assert read.provider_code == "thread_unsupported_request"
    shaped = anthropic_error(read, "req_1")
    assert shaped.status == 400
    assert shaped.body["error"]["details"] == {"error_code": "thread_unsupported_request"}
    plain = error_from_http(400, {}, json.dumps({**said, "error": {"type": "x"}}).encode())
    assert plain.provider_code == "x" and "details" not in anthropic_error(plain, "r").body["error"]
