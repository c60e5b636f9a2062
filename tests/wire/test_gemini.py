"""Google Gemini through the stack YAML alone (metis/stacks/builtin/gemini.yaml + the schema codec):
encoding, thought signatures, ids, stop reasons, usage, errors, golden cassettes, and a
conversation that moves between Anthropic, OpenAI and Gemini every turn.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.core.ids import derive_provider_tool_id
from metis.errors import AdapterError, ErrorClass, InvalidRequestError, ProtocolError
from metis.model import (
    CanonicalRequest,
    CanonicalResponse,
    Message,
    MessageComplete,
    Role,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.content import Base64ImageSource, ImageBlock, ProviderRaw, URLImageSource
from metis.model.request import ThinkingConfig, ToolChoice
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import load_stack
from metis.stages.edits import schema_cleanup
from metis.stages.policy.invariants import StreamChecker
from metis.testing.cassette import ReplayTransport
from metis.testing.emulator import Emulator, Reply, text, tools
from metis.testing.emulator.formats.gemini_rules import BYPASS
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.schema import SchemaCodec

from ..helpers import lossy_warnings, make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

CASSETTES = Path(__file__).parents[2] / "cassettes" / "gemini"
MODEL = "gemini:gemini-2.5-flash"
GEMINI_3 = "gemini:gemini-3-pro-preview"
SIG = "CiQBR29sZGVuV2VhdGhlclNpZ25hdHVyZQ=="
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)


def codec() -> SchemaCodec:
    stack = load_stack("gemini")
    (encode,) = [s for s in stack.stages if s.name == "encode"]
    (normalize,) = [s for s in stack.stages if s.name == "normalize"]
    assert encode.options["settings"] == normalize.options["settings"]  # one anchored schema
    built = get_codec("schema", encode.options["settings"])
    assert isinstance(built, SchemaCodec)
    return built


def call(model: str = MODEL) -> Any:
    return make_call(provider="gemini", model=model)


def encode(model: str = MODEL, **fields: Any) -> dict[str, Any]:
    fields.setdefault("messages", [Message.user("hi")])
    request = CanonicalRequest(model=model, max_output_tokens=256, **fields)
    return codec().encode(request, call(model))


def parse(*chunks: dict[str, Any], stream: bool = True, model: str = MODEL) -> list[Any]:
    warned: list[str] = []
    builder = MessageBuilder("gemini", model, lambda kind, *a, **k: warned.append(kind))
    events: list[Any]
    if stream:
        parser = codec().stream_parser(builder)
        events = [event for chunk in chunks for event in parser.feed(chunk)]
        events += parser.end()
    else:
        (body,) = chunks
        events = list(codec().parse_body(body, builder))
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return [*events, warned]


def chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "responseId": "r1", "modelVersion": "gemini-x", **extra}


def final_of(events: list[Any]) -> MessageComplete:
    final = events[-2]
    assert isinstance(final, MessageComplete)
    return final


# Encoding ------------------------------------------------------------------------------------


def test_a_conversation_becomes_contents_with_gemini_roles_and_parts() -> None:
    origin = ProviderRaw(provider="gemini", model=MODEL)
    messages = [
        Message.user(
            "Compare these.",
            ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo=")),
            ImageBlock(source=URLImageSource(url="https://generativelanguage.googleapis.com/v1beta/files/abc")),
        ),
        Message.assistant(
            ThinkingBlock(thinking="Look closer.", signature="th-sig", provider_raw=origin),
            TextBlock(text="Let me check.", provider_raw=origin),
            ToolUseBlock(id="call_r1_0", name="get_weather", input={"city": "Oslo"},
                         provider_raw=origin),
        ),
        Message.tool(ToolResultBlock(tool_use_id="call_r1_0", content="Sunny")),
        Message.user("And now?"),
    ]  # fmt: skip
    body = encode(messages=messages, system_prompt="Be brief.", tools=[WEATHER])
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Compare these."},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "Look closer.", "thought": True, "thoughtSignature": "th-sig"},
                {"text": "Let me check."},
                {"functionCall": {"id": "call_r1_0", "name": "get_weather",
                                  "args": {"city": "Oslo"}}},
            ],
        },
        {   # the results and the next user message: one user turn, results first
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "call_r1_0", "name": "get_weather",
                                      "response": {"output": "Sunny"}}},
                {"text": "And now?"},
            ],
        },
    ]  # fmt: skip
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parametersJsonSchema": WEATHER.input_schema,
                }
            ]
        }
    ]
    assert body["generationConfig"] == {"maxOutputTokens": 256}
    assert "toolConfig" not in body and "model" not in body  # the model is in the URL


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        (ToolChoice.auto(), {"mode": "AUTO"}),
        (ToolChoice.any(), {"mode": "ANY"}),
        (ToolChoice.none(), {"mode": "NONE"}),
        (ToolChoice.tool("get_weather"), {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
def test_tool_choice_becomes_function_calling_config(
    choice: ToolChoice, config: dict[str, Any]
) -> None:
    body = encode(tools=[WEATHER], tool_choice=choice)
    assert body["toolConfig"] == {"functionCallingConfig": config}


def test_generation_config_carries_sampling_thinking_and_output_schema() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "additionalProperties": False}  # fmt: skip
    body = encode(
        temperature=0.0,
        stop_sequences=["END"],
        thinking=ThinkingConfig(budget_tokens=2048),
        output_schema=schema,
    )
    assert body["generationConfig"] == {
        "maxOutputTokens": 256,
        "temperature": 0.0,
        "stopSequences": ["END"],
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,  # full JSON Schema: additionalProperties is fine here
        "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
    }


def test_thought_signatures_go_back_on_their_part_only_to_the_model_that_made_them() -> None:
    origin = ProviderRaw(provider="gemini", model=MODEL, data={"thoughtSignature": "sig-A"})
    bare = ProviderRaw(provider="gemini", model=MODEL)
    messages = [
        Message.user("go"),
        Message.assistant(
            TextBlock(text="Sure.", provider_raw=origin),
            ToolUseBlock(id="c1", name="get_weather", input={}, provider_raw=origin),
            ToolUseBlock(id="c2", name="get_weather", input={}, provider_raw=bare),
        ),
        Message.tool(
            ToolResultBlock(tool_use_id="c1", content="a"),
            ToolResultBlock(tool_use_id="c2", content="b"),
        ),
    ]
    same = encode(messages=messages)["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in same] == ["sig-A", "sig-A", None]
    # Another Gemini model: the signatures are not its own. Text goes bare; the calls get
    # Google's documented bypass value, which Gemini 3 needs on calls it did not sign.
    other = encode(model=GEMINI_3, messages=messages)["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in other] == [None, BYPASS, BYPASS]


def test_function_responses_are_named_from_the_history() -> None:
    messages = [
        Message.user("go"),
        Message.assistant(ToolUseBlock(id="x1", name="get_weather", input={"city": "Oslo"})),
        Message.tool(ToolResultBlock(tool_use_id="x1", content="boom", is_error=True)),
    ]
    parts = encode(messages=messages)["contents"][-1]["parts"]
    assert parts == [
        {"functionResponse": {"id": "x1", "name": "get_weather", "response": {"error": "boom"}}}
    ]
    orphan = [Message.user("go"), Message.tool(ToolResultBlock(tool_use_id="x9", content="?"))]
    with pytest.raises(InvalidRequestError, match="x9"):
        encode(messages=orphan)


def test_empty_text_and_blocks_gemini_cannot_take_are_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from metis.model.content import RedactedThinkingBlock

    messages = [
        Message.user("go", TextBlock(text="")),
        Message.assistant(TextBlock(text="ok"), RedactedThinkingBlock(data="opaque")),
    ]
    with caplog.at_level(logging.WARNING, logger="metis"):
        body = encode(messages=messages)
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"text": "ok"}]},
    ]
    assert [r.block_type for r in lossy_warnings(caplog)] == ["redacted_thinking"]  # type: ignore[attr-defined]


# Parsing -------------------------------------------------------------------------------------


def test_thought_parts_become_one_thinking_block_and_text_keeps_its_signature() -> None:
    events = parse(
        chunk({"text": "**Plan**\n", "thought": True}),
        chunk({"text": "Check twice.", "thought": True}),
        chunk({"text": "Look ", "thoughtSignature": "sig-T"}),
        chunk({"text": "both ways."}, finish="STOP"),
    )
    final = final_of(events)
    thinking, answer = final.final_content
    assert isinstance(thinking, ThinkingBlock) and thinking.thinking == "**Plan**\nCheck twice."
    assert thinking.signature is None and thinking.provider_raw is not None
    assert isinstance(answer, TextBlock) and answer.text == "Look both ways."
    assert answer.provider_raw == ProviderRaw(
        provider="gemini", model=MODEL, data={"thoughtSignature": "sig-T"}
    )
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.END_TURN, "STOP")


def test_a_signature_in_a_trailing_empty_part_signs_the_text_before_it() -> None:
    final = final_of(
        parse(
            chunk({"text": '{"city": '}),
            chunk({"text": '"Oslo"}'}),
            chunk({"text": "", "thoughtSignature": "sig-E"}, finish="STOP"),
        )
    )
    (answer,) = final.final_content
    assert isinstance(answer, TextBlock) and answer.text == '{"city": "Oslo"}'
    assert answer.provider_raw is not None and answer.provider_raw.data == {
        "thoughtSignature": "sig-E"
    }


def test_calls_without_ids_get_ids_minted_from_the_response_the_same_streamed_or_not() -> None:
    parts = [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": "s1"},
        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
    ]  # fmt: skip
    streamed = final_of(parse(chunk(parts[0]), chunk(parts[1], finish="STOP")))
    whole = final_of(parse(chunk(*parts, finish="STOP"), stream=False))
    assert streamed.final_content == whole.final_content
    ids = [b.id for b in whole.final_content if isinstance(b, ToolUseBlock)]
    assert ids == ["call_r1_0", "call_r1_1"]
    first, second = whole.final_content
    assert first.provider_raw and first.provider_raw.data == {"thoughtSignature": "s1"}
    assert second.provider_raw and second.provider_raw.data == {}  # Gemini's, unsigned
    assert (whole.stop_reason.kind, whole.stop_reason.raw) == (StopKind.TOOL_USE, "STOP")


def test_an_id_gemini_sends_is_kept() -> None:
    part = {"functionCall": {"name": "f", "args": {}, "id": "96c1su3s"}}
    (block,) = final_of(parse(chunk(part, finish="STOP"))).final_content
    assert isinstance(block, ToolUseBlock) and block.id == "96c1su3s"


_FILTERED = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
_FILTERED_TOO = ("IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR", "ESCALATION")
_NO_KIND = (  # no canonical kind means them (docs/contract.md §3)
    "FINISH_REASON_UNSPECIFIED", "LANGUAGE", "OTHER", "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE",
    "MALFORMED_RESPONSE", "IMAGE_OTHER", "NO_IMAGE",
)  # fmt: skip
FINISH_KINDS = {
    "STOP": StopKind.END_TURN,
    "MAX_TOKENS": StopKind.MAX_TOKENS,
    "CONTINUATION": StopKind.MAX_TOKENS,  # the per-request limit, the reply not done
    "PUP_LIMITED_DISABLED": StopKind.CONTENT_FILTER,  # the account, for policy violations
    **dict.fromkeys(_FILTERED + _FILTERED_TOO, StopKind.CONTENT_FILTER),
    **dict.fromkeys(_NO_KIND, StopKind.PROVIDER_SPECIFIC),
}
"""Every ``FinishReason`` of google-genai's types, as its kind."""


def test_every_finish_reason_google_genai_names_has_its_kind_here() -> None:
    """A value a newer google-genai adds fails here until it is given a kind (in gemini.yaml's
    finish_reasons, or provider_specific on purpose)."""
    genai_types = pytest.importorskip("google.genai.types")
    assert {reason.value for reason in genai_types.FinishReason} <= FINISH_KINDS.keys()


@pytest.mark.parametrize(("raw", "kind"), FINISH_KINDS.items())
def test_finish_reasons_are_never_silently_end_turn(raw: str, kind: StopKind) -> None:
    final = final_of(parse(chunk({"text": "x"}, finish=raw)))
    assert (final.stop_reason.kind, final.stop_reason.raw) == (kind, raw)


def test_a_continuation_token_is_reported_not_silently_lost() -> None:
    candidate = {"content": {"role": "model", "parts": [{"text": "Part one"}]},
                 "finishReason": "CONTINUATION", "continuationToken": "Q29udGludWU="}  # fmt: skip
    events = parse(chunk({"text": "Part"}), {"candidates": [candidate]})
    assert events[-1] == ["continuationToken"]  # the WARN, once
    assert final_of(events).stop_reason.kind is StopKind.MAX_TOKENS


_BLOCKED = ["SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY", "MODEL_ARMOR"]


def test_every_blocked_reason_google_genai_names_is_a_content_filter_stop() -> None:
    genai_types = pytest.importorskip("google.genai.types")
    for reason in genai_types.BlockedReason:  # any later one too: the path's default
        test_a_blocked_prompt_is_a_content_filter_stop(reason.value)


@pytest.mark.parametrize("reason", [*_BLOCKED, "JAILBREAK", "BLOCKED_REASON_UNSPECIFIED"])
def test_a_blocked_prompt_is_a_content_filter_stop(reason: str) -> None:
    body = {"promptFeedback": {"blockReason": reason}, "usageMetadata": {"promptTokenCount": 9}}
    final = final_of(parse(body, stream=False))
    assert final.final_content == []
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.CONTENT_FILTER, reason)


def test_a_reply_model_armor_blocked_is_a_content_filter_stop_like_a_blocked_prompt() -> None:
    # Vertex with a Model Armor template: the candidate has no content, only the reason
    candidate = {"finishReason": "MODEL_ARMOR", "finishMessage": "The reply broke a filter."}
    usage = {"promptTokenCount": 11, "candidatesTokenCount": 4, "totalTokenCount": 15}
    final = final_of(parse({"candidates": [candidate], "usageMetadata": usage}, stream=False))
    assert final.final_content == []
    assert (final.stop_reason.kind, final.stop_reason.raw) == (
        StopKind.CONTENT_FILTER,
        "MODEL_ARMOR",
    )


def test_usage_maps_all_four_counts() -> None:
    usage = {
        "promptTokenCount": 1564,
        "cachedContentTokenCount": 1024,
        "toolUsePromptTokenCount": 36,
        "candidatesTokenCount": 60,
        "thoughtsTokenCount": 27,
        "totalTokenCount": 1687,
    }
    final = final_of(parse(chunk({"text": "x"}, finish="STOP", usageMetadata=usage)))
    assert final.usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 576,  # prompt + tool-use prompt, less the cached part
        "output_tokens": 87,  # candidates + thoughts
        "cached_input_tokens": 1024,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 27,  # the thoughts, within output_tokens
    }


def test_a_count_the_last_usage_leaves_out_is_zero_as_its_total_says() -> None:
    """usageMetadata is proto3 JSON: a count of 0 is left out. In every recording the total is
    the sum of the counts given; the code-execution stream's second chunk says only its
    prompt (total 46), its first said 101 thoughts. The last usage read is the whole of it."""
    first = {"promptTokenCount": 46, "candidatesTokenCount": 51, "thoughtsTokenCount": 101,
             "totalTokenCount": 198}  # fmt: skip
    last = {"promptTokenCount": 46, "candidatesTokenCount": 5, "totalTokenCount": 51}
    events = parse(chunk({"text": "x"}, usageMetadata=first),
                   chunk({"text": "y"}, finish="STOP", usageMetadata=last))  # fmt: skip
    usage = final_of(events).usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (46, 5, 0)


def test_parts_with_no_canonical_form_are_kept_whole_as_opaque_blocks() -> None:
    """Code execution's parts are a server tool's blocks, grounding metadata citations
    (tests/wire/test_server_tools_gemini.py); an inline image in a reply is an image block
    (tests/wire/test_gemini_images.py), inline audio has no canonical form: it is kept whole
    (docs/contract.md §8), with no WARN (tests/wire/test_opaque_readers.py)."""
    events = parse(
        chunk({"executableCode": {"language": "PYTHON", "code": "1+1"}, "thoughtSignature": "s"}),
        chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2"}}),
        {**chunk({"text": "It is 2."}), "candidates": [{
            "content": {"role": "model", "parts": [{"text": "It is 2."}]},
            "groundingMetadata": {"webSearchQueries": ["1+1"]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [
            {"inlineData": {"mimeType": "image/png", "data": "AA=="}},
            {"inlineData": {"mimeType": "audio/L16;rate=24000", "data": "AA=="}}]},
            "groundingMetadata": {"webSearchQueries": ["1+1"]}, "finishReason": "STOP"}]},
    )  # fmt: skip
    assert events[-1] == []
    kinds = [b.type for b in final_of(events).final_content]
    assert kinds == ["server_tool_call", "server_tool_result", "text", "image", "opaque"]


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            {"candidates": [{"content": {"parts": {"text": "x"}}}]},
            "gemini chunk.candidates.0.content.parts: expected a list, got object",
        ),
        (
            {"candidates": [{"content": {"parts": [{"text": ["x"]}]}}]},
            "gemini chunk text: expected a string, got list",
        ),
        (
            {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
            "gemini chunk tool call name is missing",
        ),
        (
            {
                "candidates": [
                    {"content": {"parts": [{"functionCall": {"name": "f", "args": "{}"}}]}}
                ]
            },
            "gemini chunk tool call input: expected an object, got string",
        ),
        ({"candidates": [{"finishReason": 1}]}, "gemini chunk finish reason: expected a string"),
        ({"usageMetadata": {"promptTokenCount": "12"}}, "usage.promptTokenCount: expected a"),
    ],
)
def test_a_malformed_chunk_is_a_protocol_error_naming_the_field(
    bad: dict[str, Any], problem: str
) -> None:
    parser = codec().stream_parser(MessageBuilder("gemini", MODEL))
    with pytest.raises(ProtocolError, match=problem):
        parser.feed(bad)
        parser.end()  # usage is read when the message finishes


def test_a_character_split_across_chunks_is_one_text_block() -> None:
    """A chunk holding only the first half of a surrogate pair opens a block that makes no
    event yet; the parser takes the block's index from the builder, not from the last event."""
    events = parse(chunk({"text": "\ud83d"}), chunk({"text": "\ude00 ok"}, finish="STOP"))
    assert [b.text for b in final_of(events).final_content] == ["\U0001f600 ok"]  # type: ignore[union-attr]


def test_a_block_that_makes_no_event_yet_after_the_events_were_drained() -> None:
    """Each chunk returns its own events: a block opened by a chunk that makes no event must
    not be looked up among the events of the chunks before it."""
    parser = codec().stream_parser(MessageBuilder("gemini", MODEL))
    assert parser.feed(chunk({"text": "Hi. "}))
    assert not parser.feed(chunk({"thought": True, "text": "\ud83e"}))
    events = parser.feed(chunk({"thought": True, "text": "\udd14"}, finish="STOP"))
    events = [*events, *parser.end()]
    text, thinking = final_of([*events, None]).final_content
    assert (text.text, thinking.thinking) == ("Hi. ", "\U0001f914")  # type: ignore[union-attr]


# Errors --------------------------------------------------------------------------------------


def google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return json.dumps({"error": error}).encode()


RETRY = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}
QUOTA = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{}]}
BAD_KEY = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
           "domain": "googleapis.com"}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "body", "cls", "code"),
    [
        (429, google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", QUOTA, RETRY),
         ErrorClass.RATE_LIMIT, "RESOURCE_EXHAUSTED"),
        (503, google_error(503, "UNAVAILABLE", "The model is overloaded."),
         ErrorClass.OVERLOADED, "UNAVAILABLE"),
        (400, google_error(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds "
                           "the maximum number of tokens allowed (1048576)."),
         ErrorClass.CONTEXT_OVERFLOW, "INVALID_ARGUMENT"),
        (400, google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."),
         ErrorClass.INVALID_REQUEST, "INVALID_ARGUMENT"),
        (400, google_error(400, "INVALID_ARGUMENT", "A schema in GenerationConfig in the "
                           "request exceeds the maximum allowed nesting depth."),
         ErrorClass.INVALID_REQUEST, "INVALID_ARGUMENT"),
        (400, google_error(400, "INVALID_ARGUMENT", "API key not valid.", BAD_KEY),
         ErrorClass.AUTH, "API_KEY_INVALID"),
        (403, google_error(403, "PERMISSION_DENIED", "Permission denied."),
         ErrorClass.AUTH, "PERMISSION_DENIED"),
        (401, google_error(401, "UNAUTHENTICATED", "Request had invalid credentials."),
         ErrorClass.AUTH, "UNAUTHENTICATED"),
        (404, google_error(404, "NOT_FOUND", "models/x is not found"),
         ErrorClass.INVALID_REQUEST, "NOT_FOUND"),
        (500, google_error(500, "INTERNAL", "An internal error has occurred."),
         ErrorClass.SERVER_ERROR, "INTERNAL"),
        (503, b'[{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}]',
         ErrorClass.OVERLOADED, "UNAVAILABLE"),
        (502, b"<html><title>502 Bad Gateway</title></html>", ErrorClass.SERVER_ERROR, None),
    ],
)  # fmt: skip
def test_http_errors_are_classified(
    status: int, body: bytes, cls: ErrorClass, code: str | None
) -> None:
    error = codec().error_from_http(status, {}, body)
    assert (error.error_class, error.provider_code, error.provider_status) == (cls, code, status)
    assert error.retry_after_seconds == (17.0 if status == 429 else None)


def test_retry_info_reads_fractional_delays() -> None:
    body = google_error(429, "RESOURCE_EXHAUSTED", "slow down", {**RETRY, "retryDelay": "0.5s"})
    assert codec().error_from_http(429, {}, body).retry_after_seconds == 0.5


# Through the adapter ---------------------------------------------------------------------------


def gemini_adapter(transport: httpx.AsyncBaseTransport, **config: Any) -> Adapter:
    client = httpx.AsyncClient(transport=transport)
    return build_adapter(
        "gemini",
        AdapterConfig(api_key="test-key", http_client=client, **config),
        tool_id_store=InMemoryToolIdStore(),
    )


def weather_request(stream: bool, **fields: Any) -> CanonicalRequest:
    base: dict[str, Any] = {
        "model": MODEL,
        "session_id": "golden",
        "system_prompt": "You are a weather assistant.",
        "messages": [Message.user("What's the weather in Paris and in Rome, in Celsius?")],
        "tools": [WEATHER],
        "max_output_tokens": 1024,
        "temperature": 0.2,
        "stream": stream,
    }
    return CanonicalRequest(**{**base, **fields})


async def streamed_cassette() -> list[StreamEvent]:
    replay = ReplayTransport(CASSETTES / "tool_call_stream.yaml")
    events = [e async for e in gemini_adapter(replay).stream(weather_request(True))]
    assert replay.remaining == 0
    return events


@pytest.mark.anyio
async def test_golden_stream_round_trip() -> None:
    """The wire request equals the cassette's (the replay checks it), and the reply comes back
    as written there: text, two calls with canonical ids, the signature on the first call."""
    events = await streamed_cassette()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    text_block, paris, rome = final.final_content
    assert isinstance(text_block, TextBlock)
    assert text_block.text == "I'll check both cities — Paris and Rome."
    assert isinstance(paris, ToolUseBlock) and isinstance(rome, ToolUseBlock)
    assert [(c.name, c.input) for c in (paris, rome)] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_weather", {"city": "Rome", "unit": "celsius"}),
    ]
    assert paris.id.startswith("tu_") and rome.id.startswith("tu_") and paris.id != rome.id
    assert paris.provider_raw and paris.provider_raw.data == {"thoughtSignature": SIG}
    assert rome.provider_raw and "thoughtSignature" not in rome.provider_raw.data
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.TOOL_USE, "STOP")
    assert final.usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 540,
        "output_tokens": 87,
        "cached_input_tokens": 1024,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 27,
    }
    assert (final.message_id, final.model) == ("GoldenWeatherResp01", "gemini-2.5-flash")


@pytest.mark.anyio
async def test_golden_streamed_and_complete_calls_agree() -> None:
    final = (await streamed_cassette())[-1]
    replay = ReplayTransport(CASSETTES / "tool_call.yaml")
    response = await gemini_adapter(replay).complete(weather_request(False))
    assert replay.remaining == 0
    assert isinstance(final, MessageComplete)
    assert response.usage == final.usage and response.stop_reason == final.stop_reason

    def without_ids(content: list[Any]) -> list[dict[str, Any]]:
        return [block.model_dump(exclude={"id"}) for block in content]

    assert without_ids(response.content) == without_ids(final.final_content)


@pytest.mark.anyio
async def test_golden_a_history_made_on_anthropic_is_accepted_by_gemini(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """cassettes/gemini/cross_provider.yaml holds the exact body: Anthropic's thinking left
    out, derived ids on each call and its response, names resolved from the history."""
    paris, rome = "tu_01K0000000000000000000PAR1", "tu_01K0000000000000000000R0ME"
    anthropic = ProviderRaw(provider="anthropic", model="anthropic:claude-sonnet-4-5")
    history = [
        Message.user("What's the weather in Paris and in Rome, in Celsius?"),
        Message(
            role=Role.ASSISTANT,
            content=[
                ThinkingBlock(thinking="Two cities: two calls.", signature="EqQBAnthropicSignature",
                              provider_raw=anthropic),
                TextBlock(text="I'll check both cities — Paris and Rome."),
                ToolUseBlock(id=paris, name="get_weather",
                             input={"city": "Paris", "unit": "celsius"}),
                ToolUseBlock(id=rome, name="get_weather",
                             input={"city": "Rome", "unit": "celsius"}),
            ],
        ),
        Message.tool(
            ToolResultBlock(tool_use_id=paris, content="Paris: 21 °C, sunny"),
            ToolResultBlock(tool_use_id=rome, content="weather service timed out", is_error=True),
        ),
    ]  # fmt: skip
    replay = ReplayTransport(CASSETTES / "cross_provider.yaml")
    request = weather_request(False, model=GEMINI_3, session_id="golden-cross", messages=history)
    request = request.model_copy(update={"temperature": None})
    with caplog.at_level(logging.WARNING, logger="metis"):
        response = await gemini_adapter(replay).complete(request)
    assert replay.remaining == 0
    assert response.text == "Paris is 21 °C and sunny; Rome's forecast is unavailable right now."
    assert [r.block_type for r in lossy_warnings(caplog)] == ["thinking"]  # type: ignore[attr-defined]
    sent = json.loads(replay.requests[0].content)
    calls = [p["functionCall"]["id"] for p in sent["contents"][1]["parts"] if "functionCall" in p]
    answers = [p["functionResponse"]["id"] for p in sent["contents"][2]["parts"]]
    assert calls == answers == [derive_provider_tool_id(i, "call_") for i in (paris, rome)]


@pytest.mark.anyio
async def test_gemini_ids_and_signatures_go_back_to_gemini_as_it_issued_them() -> None:
    """A Gemini 3 call with its own id: the next request sends that id (the session's map)
    and the call's signature back on the call's part."""
    part = {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}, "id": "96c1su3s"},
            "thoughtSignature": "sig-G3"}  # fmt: skip
    replies = [chunk(part, finish="STOP"), chunk({"text": "Sunny."}, finish="STOP")]
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=replies[len(sent) - 1])

    adapter = gemini_adapter(httpx.MockTransport(handler))
    first = await adapter.complete(weather_request(False, model=GEMINI_3, session_id="s"))
    (tool_call,) = first.tool_calls
    assert tool_call.id.startswith("tu_")
    history = [
        *weather_request(False).messages,
        Message(role=Role.ASSISTANT, content=first.content),
        Message.tool(ToolResultBlock(tool_use_id=tool_call.id, content="Sunny")),
    ]
    await adapter.complete(weather_request(False, model=GEMINI_3, session_id="s", messages=history))
    model_turn, answer = sent[1]["contents"][1:]
    assert model_turn["parts"] == [part]
    assert answer["parts"][0]["functionResponse"]["id"] == "96c1su3s"


@pytest.mark.anyio
async def test_tool_schemas_go_as_json_schema_with_one_warn_per_keyword_gemini_ignores(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``parametersJsonSchema`` takes JSON Schema: a closed object, a nullable type list and
    ``oneOf`` go as written; a local ``$ref`` is inlined; a keyword Gemini does not honour
    (``exclusiveMinimum``) is taken out with one WARN."""
    pydantic_like = {
        "$defs": {"Unit": {"enum": ["celsius", "fahrenheit"], "type": "string"}},
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"$ref": "#/$defs/Unit"},
            "days": {"type": ["integer", "null"], "exclusiveMinimum": 0},
            "when": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["city"],
        "type": "object",
    }
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=chunk({"text": "ok"}, finish="STOP"))

    tool = ToolDefinition(name="forecast", input_schema=pydantic_like)
    schema_cleanup._warned.clear()  # warned of once per process
    with caplog.at_level(logging.WARNING, logger="metis"):
        await gemini_adapter(httpx.MockTransport(handler)).complete(
            weather_request(False, tools=[tool])
        )
    (declaration,) = sent[0]["tools"][0]["functionDeclarations"]
    assert "parameters" not in declaration
    assert declaration["parametersJsonSchema"] == {
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"enum": ["celsius", "fahrenheit"], "type": "string"},
            "days": {"type": ["integer", "null"]},
            "when": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["city"],
        "type": "object",
    }
    records = [r for r in caplog.records if getattr(r, "event", None) == "metis.schema_cleanup"]
    assert [r.keyword for r in records] == ["exclusiveMinimum"]  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_metis_tool_goes_to_gemini_without_a_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The schema ``@metis.tool`` makes (closed: ``additionalProperties: false``) is one Gemini
    takes whole, so a tool sent on every call logs nothing."""
    import metis

    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=chunk({"text": "ok"}, finish="STOP"))

    @metis.tool
    def look_up_tide(harbour: str, days: int = 1) -> str:
        """Tide times for a harbour."""
        return "high at noon"

    schema_cleanup._warned.clear()
    adapter = gemini_adapter(httpx.MockTransport(handler))
    request = weather_request(False, tools=[look_up_tide.definition])
    with caplog.at_level(logging.WARNING, logger="metis"):
        for _ in range(3):
            await adapter.complete(request)
    assert [r for r in caplog.records if "schema" in r.getMessage()] == []
    (declaration,) = sent[-1]["tools"][0]["functionDeclarations"]
    assert declaration["parametersJsonSchema"] == look_up_tide.definition.input_schema


async def stream_sse(body: str) -> tuple[list[StreamEvent], BaseException | None]:
    """Stream ``body`` (SSE) through the Gemini adapter: the events, and what it raised."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    adapter = gemini_adapter(httpx.MockTransport(handler), max_retries=0)
    events: list[StreamEvent] = []
    try:
        async for event in adapter.stream(weather_request(True)):
            events.append(event)
    except AdapterError as exc:
        return events, exc
    return events, None


@pytest.mark.anyio
async def test_an_error_inside_a_stream_ends_the_message_then_raises() -> None:
    usage = {"promptTokenCount": 12, "candidatesTokenCount": 1}
    events, error = await stream_sse(
        f"data: {json.dumps(chunk({'text': 'Par'}, usageMetadata=usage))}\r\n\r\n"
        'data: {"error": {"code": 503, "message": "The model is overloaded.", '
        '"status": "UNAVAILABLE"}}\r\n\r\n'
    )
    assert isinstance(error, AdapterError) and error.error_class is ErrorClass.OVERLOADED
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
    assert final.final_content == [TextBlock(text="Par")]
    # The usage Gemini reported so far, not an estimate.
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 1)
    assert not final.usage.estimated


@pytest.mark.anyio
async def test_signatures_survive_a_stream_that_ends_in_an_error() -> None:
    # What arrived before the fault is in the final message, signatures included: a history
    # that keeps the partial turn can still send them back to the model that made them.
    signed_text = {"text": "Checking.", "thoughtSignature": "sig-T"}
    signed_call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                   "thoughtSignature": "sig-C"}  # fmt: skip
    events, error = await stream_sse(
        f"data: {json.dumps(chunk(signed_text))}\r\n\r\n"
        f"data: {json.dumps(chunk(signed_call))}\r\n\r\n"
        'data: {"error": {"code": 500, "message": "Internal error.", "status": "INTERNAL"}}'
        "\r\n\r\n"
    )
    assert isinstance(error, AdapterError) and error.error_class is ErrorClass.SERVER_ERROR
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
    text_block, call_block = final.final_content
    assert isinstance(text_block, TextBlock) and isinstance(call_block, ToolUseBlock)
    assert text_block.provider_raw == ProviderRaw(
        provider="gemini", model=MODEL, data={"thoughtSignature": "sig-T"}
    )
    assert call_block.provider_raw is not None
    assert call_block.provider_raw.data == {"thoughtSignature": "sig-C"}


@pytest.mark.anyio
async def test_a_stream_cut_before_its_finish_reason_is_a_protocol_error() -> None:
    events, error = await stream_sse(f"data: {json.dumps(chunk({'text': 'Par'}))}\r\n\r\n")
    assert isinstance(error, ProtocolError)
    assert "ended before its finish reason" in str(error)
    final = events[-1]  # what arrived is kept
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
    assert final.final_content == [TextBlock(text="Par")]


# A conversation across three providers ------------------------------------------------------


def script() -> list[Reply]:
    return [
        tools(("get_weather", {"city": "Paris"})),
        text("Sunny in Paris."),
        tools(("get_weather", {"city": "Berlin"}), ("get_weather", {"city": "Rome"}), say="Both."),
        tools(("get_weather", {"city": "Oslo"})),
        text("Berlin cloudy, Rome hot, Oslo cold."),
        text("Done."),
    ]


USERS = ["Weather in Paris?", "And Berlin and Rome?", "Thanks, one line."]


async def converse(order: list[Adapter], streaming: bool) -> list[Message]:
    users = iter(USERS)
    history = [Message.user(next(users))]
    for adapter in order:
        model = GEMINI_3 if adapter.name == "gemini" else f"{adapter.name}:test-model"
        request = CanonicalRequest(
            model=model,
            session_id="swap",
            system_prompt="Be brief.",
            messages=history,
            tools=[WEATHER],
            max_output_tokens=512,
            stream=streaming,
        )
        if streaming:
            final = [e async for e in adapter.stream(request)][-1]
            assert isinstance(final, MessageComplete)
            content = final.final_content
        else:
            response: CanonicalResponse = await adapter.complete(request)
            content = response.content
        history = [*history, Message(role=Role.ASSISTANT, content=content)]
        calls = [b for b in content if isinstance(b, ToolUseBlock)]
        if calls:
            results = [
                ToolResultBlock(tool_use_id=c.id, content=f"{c.input['city']}: ok") for c in calls
            ]
            history.append(Message.tool(*results))
        elif (following := next(users, None)) is not None:
            history.append(Message.user(following))
    return history


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_conversation_moving_between_three_providers_is_accepted_every_turn(
    streaming: bool,
) -> None:
    """Each provider is the emulator in scripted mode, refusing what its real counterpart
    would refuse with a 400: Gemini 3 checks function response counts and a signature it
    issued (or the bypass value) on the current turn's calls."""
    emulator = Emulator(model=script(), models="any")
    store = InMemoryToolIdStore()
    config = AdapterConfig(api_key="test-key", http_client=emulator.client())
    a, o, g = (
        build_adapter(s, config, tool_id_store=store) for s in ("anthropic", "openai", "gemini")
    )
    history = await converse([a, g, o, g, g, a], streaming)
    assert history[-1].text == "Done."
    assert [len(emulator.bodies(p)) for p in ("anthropic", "openai", "gemini")] == [2, 1, 3]

    # Gemini's own first call (turn 4) goes back with the signature Gemini put on it and the
    # id minted from its response; the calls made elsewhere carry the bypass value.
    last = emulator.bodies("gemini")[-1]["contents"]
    signed = [p for c in last for p in c["parts"] if "thoughtSignature" in p]
    own = [p for p in signed if p["thoughtSignature"] != BYPASS]
    assert [p["functionCall"]["args"] for p in own] == [{"city": "Oslo"}]
    assert re.fullmatch(r"call_[0-9A-Za-z]{22}_0", own[0]["functionCall"]["id"])
    foreign = [p for p in signed if p["thoughtSignature"] == BYPASS]
    assert [p["functionCall"]["args"]["city"] for p in foreign] == ["Paris", "Berlin", "Rome"]
    canonical = [b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    assert len(set(canonical)) == 4 and all(i.startswith("tu_") for i in canonical)


@pytest.mark.parametrize("stream", [True, False])
def test_a_part_field_given_as_null_is_a_field_not_given(stream: bool) -> None:
    """A server speaking Gemini's format that writes every field of a part, the absent ones
    as null (a re-serializing proxy), lost the whole reply: ``"text": null`` beside a
    ``functionCall`` made the part a text part with no text, a ProtocolError."""
    empty = {"text": None, "thought": None, "thoughtSignature": None, "functionCall": None}
    call = {**empty, "functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    said = {**empty, "text": "Checking."}
    events = parse(chunk(said, call, {k: None for k in empty}, finish="STOP"), stream=stream)
    final = final_of(events)
    kinds = [type(block).__name__ for block in final.final_content]
    assert kinds == ["TextBlock", "ToolUseBlock"], final.final_content
    assert final.final_content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert final.stop_reason.kind is StopKind.TOOL_USE


def candidate(index: int | None, text: str, finish: str | None = None) -> dict[str, Any]:
    (given,) = chunk({"text": text}, finish=finish)["candidates"]
    return given if index is None else {**given, "index": index}


@pytest.mark.parametrize("stream", [True, False])
def test_the_candidate_is_read_by_its_index_not_its_position(stream: bool) -> None:
    first = chunk(candidates=[candidate(1, "Other. ", "MAX_TOKENS"), candidate(0, "Mine.", "STOP")])
    if stream:
        second = chunk(candidates=[candidate(0, " More.", "STOP"), candidate(1, " No.")])
        only_other = chunk(candidates=[candidate(1, " Nor this.")])
        events = parse(first, only_other, second)
        assert final_of(events).final_content == [TextBlock(text="Mine. More.")]
    else:
        events = parse(first, stream=False)
        assert final_of(events).final_content == [TextBlock(text="Mine.")]
    assert final_of(events).stop_reason.raw == "STOP"
    # a server numbering its one candidate otherwise (or, as Vertex, not at all) is read too
    for index in (3, None):
        events = parse(chunk(candidates=[candidate(index, "Hi", "STOP")]), stream=stream)
        assert final_of(events).final_content == [TextBlock(text="Hi")]


@pytest.mark.parametrize(
    ("candidates", "problem"),
    [
        ([candidate(0, "a"), "b"], r"gemini chunk.candidates\[1\]: expected an object"),
        (["b"], r"gemini chunk.candidates\[0\]: expected an object"),
        ({"index": 0}, "gemini chunk.candidates: expected a list"),
    ],
)
def test_candidates_that_are_not_objects_are_a_protocol_error_naming_them(
    candidates: Any, problem: str
) -> None:
    parser = codec().stream_parser(MessageBuilder("gemini", MODEL))
    with pytest.raises(ProtocolError, match=problem):
        parser.feed({"candidates": candidates})
