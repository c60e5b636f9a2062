"""The schema-driven codec on two made-up wire formats (docs/stacks.md): ``blocks`` and ``separate``
content, dot paths, templates, stream fragments, errors; and the schema_cleanup stage.

Neither format exists anywhere: if these pass, a provider shaped like either one is added by
YAML alone. "Parrot" puts mixed items in one list detected by a field's value; "Ledger" has
its text in a string field and its tool calls in a separate list, streamed as fragments.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import yaml

from metis.errors import (
    ErrorClass,
    InvalidRequestError,
    OverloadedError,
    ProtocolError,
    StackError,
)
from metis.model.content import (
    ImageBlock,
    Message,
    OpaqueBlock,
    ProviderRaw,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.events import (
    MessageComplete,
    TextDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import CanonicalRequest, ToolChoice, ToolDefinition
from metis.model.response import StopKind
from metis.stages.edits import schema_cleanup
from metis.stages.edits.schema_cleanup import SchemaCleanup
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import CodecFactory, get_codec
from metis.wire.schema import SchemaCodec, codec
from metis.wire.schema.paths import OMIT, Template, compile_path, resolve, seconds

from ..helpers import make_call

PARROT = yaml.safe_load(
    """
name: parrot
message_schema:
  messages_key: dialog
  role_key: who
  role_map: {user: human, assistant: bot, tool: human}
  content_key: bits
  merge_same_role: true
  system_prompt: {mode: top_level, key: setup.preamble, wrap: string}
  text_template: {kind: say, words: "{text}"}
  thinking_template: {kind: muse, words: "{thinking}", seal: "{signature}"}
  tool_call_block_template: {kind: invoke, call: {ref: "{id}", fn: "{name}", params: "{input}"}}
  tool_result:
    role: human
    block_template: {kind: outcome, ref: "{tool_call_id}", fn: "{tool_name}", value: "{content}"}
    error_template: {kind: outcome, ref: "{tool_call_id}", fn: "{tool_name}", oops: "{content}"}
  echo: [stamp]
request_schema:
  body_template:
    limits: {max: "{max_output_tokens}", heat: "{temperature}", halt: "{stop_sequences}"}
    toolbox: "{tools}"
    must: "{tool_choice}"
    think: {$if: thinking, $then: {budget: "{thinking_budget}"}}
  tool_template: {fn: "{name}", about: "{description}", shape: "{input_schema}"}
  tool_choice: {any: {any: true}, tool: {only: ["{name}"]}}
response_schema:
  content_mode: blocks
  content_path: reply.bits
  block_detect:
    thinking: {field: kind, value: muse}
    text: {field: kind, value: say}
    tool_call: {field: kind, value: invoke}
  text_value: words
  thinking_value: words
  thinking_signature: seal
  tool_call_name: call.fn
  tool_call_input: call.params
  tool_call_id: call.ref
  response_id_path: reply.ticket
  model_path: reply.engine
  usage_path: meter
  input_tokens: in
  output_tokens: [out, musing]
  cached_input_tokens: reused
  input_includes_cached: true
  finish_reason_path: verdict
  finish_reasons: {done: end_turn, cut: max_tokens, acted: tool_use}
  dropped_fields: [reply.footnotes]
error_schema:
  path: problem
  message: text
  code: [kind]
  retry_after: wait
  classes: {busy: overloaded, confused: invalid_request}
"""
)

LEDGER = yaml.safe_load(
    """
name: ledger
message_schema:
  messages_key: log
  role_map: {user: person, assistant: machine, system: rules}
  content_key: body
  content_wrap: string
  system_prompt: {mode: role}
  text_template: {type: text, text: "{text}"}
  image_url_template: {type: picture, href: "{url}"}
  tool_calls_key: acts
  tool_call_block_template: {handle: "{id}", op: {name: "{name}", json: "{input_json}"}}
  tool_result:
    role: result
    wrap_mode: direct
    block_template: {handle: "{tool_call_id}", body: "{content}"}
request_schema:
  body_template:
    engine: "{model}"
    cap: "{max_output_tokens}"
    live: "{stream}"
    functions: "{tools}"
    format:
      $if: output_schema
      $then: {kind: json, schema: "{output_schema}", label: "{output_schema_name}"}
  tool_template: {name: "{name}", params: "{input_schema}"}
response_schema:
  content_mode: separate
  content_path: out.msg
  text_field: body
  thinking_field: mind
  tool_calls_field: acts
  tool_call_id: handle
  tool_call_name: op.name
  tool_call_input: op.json
  tool_call_input_format: json_string
  response_id_path: out.id
  model_path: out.engine
  usage_path: cost.tokens
  input_tokens: prompt
  output_tokens: reply
  finish_reason_path: out.end
  finish_reasons: {FINISHED: end_turn, ACTED: tool_use, LIMIT: max_tokens}
stream_schema:
  content_path: out.delta
  tool_call_index: slot
"""
)


def build(settings: dict[str, Any]) -> SchemaCodec:
    built = get_codec("schema", settings)
    assert isinstance(built, SchemaCodec)
    return built


def events_of(codec_: SchemaCodec, objects: list[dict[str, Any]], stream: bool = True) -> list[Any]:
    builder = MessageBuilder("toy", "toy:m")
    events: list[Any]
    if stream:
        parser = codec_.stream_parser(builder)
        events = [event for obj in objects for event in parser.feed(json.loads(json.dumps(obj)))]
        events += parser.end()
    else:
        (body,) = objects
        events = list(codec_.parse_body(body, builder))
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events


def final_of(events: list[Any]) -> MessageComplete:
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


WEATHER = ToolDefinition(
    name="weather",
    description="Weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


# Dot paths and templates ------------------------------------------------------------------


def test_dot_paths_walk_objects_lists_and_wildcards() -> None:
    doc = {"a": [{"b": {"c": 1}}, {"b": {"c": 2}}], "d": {"0": "zero"}, "e": None}
    assert resolve(doc, compile_path("a.1.b.c")) == 2
    assert resolve(doc, compile_path("a.-1.b.c")) == 2
    assert resolve(doc, compile_path("a.*.b.c")) == [1, 2]
    assert resolve(doc, compile_path("d.0")) == "zero"
    for missing in ("a.5.b", "a.x", "e.f", "z", "a.0.b.c.d"):
        assert resolve(doc, compile_path(missing)) is None
    assert resolve(doc, compile_path("z.*.c")) == []
    with pytest.raises(StackError):
        compile_path("a..b")


def test_templates_drop_what_is_absent_and_keep_what_was_written() -> None:
    template = Template(
        {"a": "{x}", "b": {"c": "{y}"}, "d": [{"e": "{y}"}], "f": {}, "g": "n={x}", "h": 3},
        ["x", "y"],
        "test",
    )
    assert template.render({"x": {"k": [1]}, "y": None}) == {
        "a": {"k": [1]},
        "f": {},
        "g": "n={'k': [1]}",
        "h": 3,
    }
    assert template.render({"x": None, "y": 0}) == {"b": {"c": 0}, "d": [{"e": 0}], "f": {}, "h": 3}
    assert Template("{x}", ["x"], "t").render({}) is OMIT
    conditional = Template({"k": {"$if": "x", "$then": "on"}}, ["x"], "t")
    assert conditional.render({"x": True}) == {"k": "on"}
    assert conditional.render({"x": False}) is OMIT


def test_a_rendered_value_is_a_copy() -> None:
    value = {"nested": [1]}
    out = Template({"a": "{x}"}, ["x"], "t").render({"x": value})
    out["a"]["nested"].append(2)
    assert value == {"nested": [1]}


def test_durations_read_as_seconds() -> None:
    assert [seconds(v) for v in (17, "17", "17s", "1.5s", "250ms", "2m", "x", None, True)] == [
        17.0, 17.0, 17.0, 1.5, 0.25, 120.0, None, None, None,
    ]  # fmt: skip


# Settings ------------------------------------------------------------------------------------


def test_the_codec_is_a_factory_and_each_stack_gets_its_own() -> None:
    assert isinstance(codec, CodecFactory)
    assert build(PARROT).name == "parrot" and build(LEDGER).name == "ledger"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"response_schema": {"contnet_path": "x"}}, "contnet_path"),
        ({"message_schema": {"text_template": {"t": "{txt}"}}}, "unknown placeholder {txt}"),
        ({"response_schema": {"content_path": "a..b"}}, "not a dot path"),
        ({"response_schema": {"block_detect": {"text": {}}}}, "give a key"),
        ({"response_schema": {"finish_reasons": {"x": "finished"}}}, "finish_reasons.x"),
        ({"stream_schema": {"content_mode": "sideways"}}, "stream_schema"),
        ({"request_schema": {"body_template": {"a": {"$if": "stream"}}}}, "conditional"),
    ],
)
def test_a_bad_setting_fails_when_the_stack_is_built(change: dict[str, Any], message: str) -> None:
    with pytest.raises(StackError, match=message.replace("{", r"\{").replace("}", r"\}")):
        build({**PARROT, **change})


# Blocks mode ---------------------------------------------------------------------------------


def parrot_reply(**extra: Any) -> dict[str, Any]:
    return {
        "reply": {
            "ticket": "t-1",
            "engine": "parrot-2",
            "bits": [
                {"kind": "muse", "words": "Let me think.", "seal": "s3al"},
                {"kind": "say", "words": "Checking ", "stamp": "st-1"},
                {"kind": "say", "words": "now."},
                {"kind": "invoke",
                 "call": {"ref": "c-9", "fn": "weather", "params": {"city": "Oslo"}}},
                {"kind": "doodle", "svg": "<svg/>"},
            ],
        },
        "meter": {"in": 30, "out": 7, "musing": 5, "reused": 10},
        "verdict": "acted",
        **extra,
    }  # fmt: skip


def test_blocks_mode_reads_mixed_items_by_a_field_value() -> None:
    final = final_of(events_of(build(PARROT), [parrot_reply()], stream=False))
    thinking, text, call, doodle = final.final_content
    assert isinstance(doodle, OpaqueBlock) and doodle.kind == "kind"  # its first key names it
    assert doodle.provider_raw.data == {"item": {"kind": "doodle", "svg": "<svg/>"}}
    assert isinstance(thinking, ThinkingBlock)
    assert (thinking.thinking, thinking.signature) == ("Let me think.", "s3al")
    assert isinstance(text, TextBlock) and text.text == "Checking now."
    assert text.provider_raw == ProviderRaw(provider="toy", model="toy:m", data={"stamp": "st-1"})
    assert isinstance(call, ToolUseBlock)
    assert (call.id, call.name, call.input) == ("c-9", "weather", {"city": "Oslo"})
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.TOOL_USE, "acted")
    assert final.usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 20,  # "in" counts the 10 reused tokens too
        "output_tokens": 12,
        "cached_input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert (final.message_id, final.model) == ("t-1", "parrot-2")


def test_an_unknown_item_is_kept_whole_with_no_warn() -> None:
    warned: list[tuple[Any, ...]] = []
    builder = MessageBuilder("toy", "toy:m", lambda *a, **k: warned.append((*a, k)))
    final = final_of(list(build(PARROT).parse_body(parrot_reply(), builder)))
    assert warned == []
    assert [b.type for b in final.final_content][-1] == "opaque"


def test_blocks_mode_streams_chunk_by_chunk_and_text_accumulates() -> None:
    chunks = [
        {"reply": {"ticket": "t-2", "bits": [{"kind": "say", "words": "Hel"}]}},
        {"reply": {"bits": [{"kind": "say", "words": "lo"}]}, "meter": {"in": 3, "out": 1}},
        {"reply": {"bits": [{"kind": "invoke", "call": {"fn": "weather", "params": {}}}]}},
        {"reply": {"bits": [{"kind": "say", "words": "!"}]}, "verdict": "done"},
        {"meter": {"in": 3, "out": 4}, "reply": {"footnotes": ["[1]"]}},
    ]
    warned: list[str] = []
    builder = MessageBuilder("toy", "toy:m", lambda kind, *a, **k: warned.append(kind))
    parser = build(PARROT).stream_parser(builder)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    events += parser.end()
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["Hel", "lo", "!"]
    final = final_of(events)
    assert [type(b).__name__ for b in final.final_content] == [
        "TextBlock",
        "ToolUseBlock",
        "TextBlock",
    ]
    call = final.final_content[1]
    assert isinstance(call, ToolUseBlock) and call.id == "call_t-2_0"  # minted: no id sent
    assert final.stop_reason.kind is StopKind.END_TURN
    assert final.usage.output_tokens == 4
    assert warned == ["footnotes"]


def test_a_stream_without_a_finish_reason_was_cut_short() -> None:
    parser = build(PARROT).stream_parser(MessageBuilder("toy", "toy:m"))
    parser.feed({"reply": {"bits": [{"kind": "say", "words": "Hel"}]}})
    with pytest.raises(ProtocolError, match="ended before its finish reason"):
        parser.end()


def test_an_unknown_finish_reason_is_provider_specific_never_end_turn() -> None:
    final = final_of(events_of(build(PARROT), [parrot_reply(verdict="vanished")], stream=False))
    assert (final.stop_reason.kind, final.stop_reason.raw) == (
        StopKind.PROVIDER_SPECIFIC,
        "vanished",
    )
    body = parrot_reply()
    del body["verdict"]
    final = final_of(events_of(build(PARROT), [body], stream=False))
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.PROVIDER_SPECIFIC, None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            {"reply": {"bits": {"kind": "say"}}, "verdict": "done"},
            "parrot response.reply.bits: expected a list, got object",
        ),
        (
            {"reply": {"bits": ["just a string"]}, "verdict": "done"},
            "parrot response content part: expected an object, got string",
        ),
        (
            {"reply": {"bits": [{"kind": "say", "words": 42}]}, "verdict": "done"},
            "parrot response text: expected a string, got int 42",
        ),
        (
            {"reply": {"bits": [{"kind": "invoke", "call": {"params": {}}}]}, "verdict": "done"},
            "parrot response tool call name is missing",
        ),
        (
            {"reply": {"bits": [{"kind": "invoke", "call": {"fn": "f", "params": [1]}}]}},
            "parrot response tool call input: expected an object, got list",
        ),
        (
            {"reply": {"bits": []}, "meter": {"in": "many"}, "verdict": "done"},
            "usage.in: expected a token count",
        ),
        ({"reply": {"bits": []}, "verdict": 7}, "parrot response finish reason: expected a string"),
    ],
)
def test_malformed_input_is_a_protocol_error_naming_the_field(
    body: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ProtocolError, match=problem):
        build(PARROT).parse_body(body, MessageBuilder("toy", "toy:m"))


# Separate mode -------------------------------------------------------------------------------


def test_separate_mode_reads_a_text_field_and_a_tool_call_list() -> None:
    body = {
        "out": {
            "id": "L1",
            "engine": "ledger-9",
            "msg": {
                "mind": "hmm",
                "body": "On it.",
                "acts": [
                    {"handle": "a1", "op": {"name": "weather", "json": '{"city":"Oslo"}'}},
                    {"handle": "a2", "op": {"name": "weather", "json": '{"city":"Rome"}'}},
                ],
            },
            "end": "ACTED",
        },
        "cost": {"tokens": {"prompt": 10, "reply": 4}},
    }
    final = final_of(events_of(build(LEDGER), [body], stream=False))
    kinds = [(type(b).__name__, getattr(b, "id", None)) for b in final.final_content]
    assert kinds == [("ThinkingBlock", None), ("TextBlock", None), ("ToolUseBlock", "a1"),
                     ("ToolUseBlock", "a2")]  # fmt: skip
    assert [b.input for b in final.final_content if isinstance(b, ToolUseBlock)] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    assert final.stop_reason.kind is StopKind.TOOL_USE
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 4)


def test_separate_mode_streams_tool_call_fragments_by_index() -> None:
    """Fragments of one call at a time, the id and name only on the first, as OpenAI-shaped
    servers send them."""

    def delta(**fields: Any) -> dict[str, Any]:
        return {"out": {"delta": fields}}

    chunks = [
        {"out": {"id": "L2", "engine": "ledger-9", "delta": {"body": "Let "}}},
        delta(body="me see."),
        delta(acts=[{"slot": 0, "handle": "a1", "op": {"name": "weather", "json": '{"city"'}}]),
        delta(acts=[{"slot": 0, "op": {"json": ':"Oslo"}'}}]),
        delta(acts=[{"slot": 1, "handle": "a2", "op": {"name": "weather", "json": ""}}]),
        delta(acts=[{"slot": 1, "op": {"json": '{"city":"Rome"}'}}]),
        {"out": {"end": "ACTED"}},
        {"cost": {"tokens": {"prompt": 10, "reply": 8}}},
    ]
    events = events_of(build(LEDGER), chunks)
    starts = [(e.tool_use_id, e.tool_name) for e in events if isinstance(e, ToolUseStart)]
    assert starts == [("a1", "weather"), ("a2", "weather")]
    fragments = [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)]
    assert fragments == ['{"city"', ':"Oslo"}', '{"city":"Rome"}']  # as received
    assert [e.tool_use_id for e in events if isinstance(e, ToolUseEnd)] == ["a1", "a2"]
    final = final_of(events)
    assert final.final_content[0] == TextBlock(text="Let me see.")
    assert final.usage.output_tokens == 8
    assert [(b.id, b.input) for b in final.final_content if isinstance(b, ToolUseBlock)] == [
        ("a1", {"city": "Oslo"}),
        ("a2", {"city": "Rome"}),
    ]


# Encoding ------------------------------------------------------------------------------------


def history() -> list[Message]:
    call = ToolUseBlock(id="c-1", name="weather", input={"city": "Oslo"})
    return [
        Message.user("Weather in Oslo?"),
        Message.assistant("Checking.", call),
        Message.tool(ToolResultBlock(tool_use_id="c-1", content="Sunny")),
        Message.user("Thanks"),
    ]


def request(**fields: Any) -> CanonicalRequest:
    base: dict[str, Any] = {
        "model": "toy:m",
        "messages": history(),
        "max_output_tokens": 100,
        "system_prompt": "Be brief.",
        "tools": [WEATHER],
    }
    return CanonicalRequest(**{**base, **fields})


def test_blocks_mode_encodes_templates_roles_and_a_top_level_system_prompt() -> None:
    call = make_call(provider="toy", model="toy:m")
    body = build(PARROT).encode(request(temperature=0.5, tool_choice=ToolChoice.any()), call)
    assert body == {
        "setup": {"preamble": "Be brief."},
        "dialog": [
            {"who": "human", "bits": [{"kind": "say", "words": "Weather in Oslo?"}]},
            {
                "who": "bot",
                "bits": [
                    {"kind": "say", "words": "Checking."},
                    {"kind": "invoke",
                     "call": {"ref": "c-1", "fn": "weather", "params": {"city": "Oslo"}}},
                ],
            },
            {   # the tool message and the next user message share a wire role: merged
                "who": "human",
                "bits": [
                    {"kind": "outcome", "ref": "c-1", "fn": "weather", "value": "Sunny"},
                    {"kind": "say", "words": "Thanks"},
                ],
            },
        ],
        "limits": {"max": 100, "heat": 0.5},
        "toolbox": [
            {"fn": "weather", "about": "Weather for a city", "shape": WEATHER.input_schema}
        ],
        "must": {"any": True},
    }  # fmt: skip


def test_separate_mode_encodes_string_content_tool_call_lists_and_direct_results() -> None:
    call = make_call(provider="toy", model="toy:m")
    schema = {"type": "object", "title": "Answer"}
    body = build(LEDGER).encode(request(output_schema=schema, stream=True), call)
    assert body == {
        "log": [
            {"role": "rules", "body": "Be brief."},
            {"role": "person", "body": "Weather in Oslo?"},
            {
                "role": "machine",
                "body": "Checking.",
                "acts": [{"handle": "c-1", "op": {"name": "weather", "json": '{"city":"Oslo"}'}}],
            },
            {"role": "result", "handle": "c-1", "body": "Sunny"},
            {"role": "person", "body": "Thanks"},
        ],
        "engine": "m",
        "cap": 100,
        "live": True,
        "functions": [{"name": "weather", "params": WEATHER.input_schema}],
        "format": {"kind": "json", "schema": schema, "label": "Answer"},
    }


def test_content_that_is_not_only_text_is_a_list_of_parts(caplog: pytest.LogCaptureFixture) -> None:
    image = ImageBlock(source=URLImageSource(url="https://x/cat.png"))
    thinking = ThinkingBlock(thinking="hm", signature="sig")
    message = Message.user("Look:", image, thinking)
    call = make_call(provider="toy", model="toy:m")
    with caplog.at_level(logging.WARNING, logger="metis"):
        body = build(LEDGER).encode(request(messages=[message], system_prompt=None), call)
    assert body["log"] == [
        {
            "role": "person",
            "body": [{"type": "text", "text": "Look:"}, {"type": "picture", "href": "https://x/cat.png"}],
        }
    ]  # fmt: skip
    dropped = [r for r in caplog.records if getattr(r, "event", None) == "metis.lossy_projection"]
    assert [r.block_type for r in dropped] == ["thinking"]  # type: ignore[attr-defined]


def test_a_result_whose_call_is_not_in_the_history_is_named_by_position() -> None:
    messages = [
        Message.user("go"),
        Message.assistant(ToolUseBlock(id="c-1", name="weather", input={})),
        Message.tool(ToolResultBlock(tool_use_id="other-id", content="x", is_error=True)),
    ]
    call = make_call(provider="toy", model="toy:m")
    body = build(PARROT).encode(request(messages=messages), call)
    assert body["dialog"][-1]["bits"] == [
        {"kind": "outcome", "ref": "other-id", "fn": "weather", "oops": "x"}
    ]
    orphan = [Message.user("go"), Message.tool(ToolResultBlock(tool_use_id="nowhere", content="x"))]
    with pytest.raises(InvalidRequestError, match="nowhere"):
        build(PARROT).encode(request(messages=orphan), call)


def test_echo_fields_go_back_only_to_the_same_provider_and_model() -> None:
    raw = ProviderRaw(provider="toy", model="toy:m", data={"stamp": "st-1", "other": 1})
    messages = [Message.user("hi"), Message.assistant(TextBlock(text="yo", provider_raw=raw))]
    same = build(PARROT).encode(
        request(messages=messages), make_call(provider="toy", model="toy:m")
    )
    assert same["dialog"][1]["bits"] == [{"kind": "say", "words": "yo", "stamp": "st-1"}]
    other = make_call(provider="toy", model="toy:other")
    elsewhere = build(PARROT).encode(request(messages=messages), other)
    assert elsewhere["dialog"][1]["bits"] == [{"kind": "say", "words": "yo"}]


# Errors --------------------------------------------------------------------------------------


def test_errors_are_classified_from_the_schema() -> None:
    body = json.dumps({"problem": {"kind": "busy", "text": "try later", "wait": "3s"}}).encode()
    error = build(PARROT).error_from_http(503, {}, body)
    assert isinstance(error, OverloadedError)
    assert (error.provider_code, error.retry_after_seconds) == ("busy", 3.0)
    error = build(PARROT).error_from_http(400, {}, b'{"problem": {"kind": "?", "text": "no"}}')
    assert error.error_class is ErrorClass.INVALID_REQUEST and error.provider_message == "no"
    error = build(PARROT).error_from_http(502, {}, b"<html><title>Bad gateway</title></html>")
    assert error.error_class is ErrorClass.SERVER_ERROR and "Bad gateway" in error.message
    header = build(PARROT).error_from_http(429, {"retry-after": "9"}, body)
    assert header.retry_after_seconds == 9.0  # the HTTP header wins over the body


def test_an_error_object_in_a_stream_raises_it() -> None:
    parser = build(PARROT).stream_parser(MessageBuilder("toy", "toy:m"))
    parser.feed({"reply": {"bits": [{"kind": "say", "words": "Hel"}]}})
    with pytest.raises(OverloadedError) as caught:
        parser.feed({"problem": {"kind": "busy", "text": "later"}})
    assert caught.value.provider_status is None


# schema_cleanup ------------------------------------------------------------------------------


def cleanup(**options: Any) -> SchemaCleanup:
    return SchemaCleanup(**options)


NESTED = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "additionalProperties": {"type": "string", "const": "x"},  # a property, not a keyword
        "when": {"$ref": "#/$defs/Time", "description": "local time"},
        "tags": {"type": "array", "items": {"type": ["string", "null"], "uniqueItems": True}},
        "mode": {"enum": [{"additionalProperties": 1}], "default": {"const": 2}},
    },
    "$defs": {"Time": {"type": "object", "additionalProperties": False,
                       "properties": {"h": {"type": "integer", "exclusiveMinimum": 0}}}},
}  # fmt: skip


def test_cleanup_removes_keywords_only_where_they_are_keywords() -> None:
    stage = cleanup(remove=["$schema", "additionalProperties", "const", "exclusiveMinimum",
                            "uniqueItems", "$defs", "$ref"],
                    inline_refs=True, nullable_type_lists=True)  # fmt: skip
    cleaned, removed = stage.clean(NESTED)
    assert cleaned == {
        "type": "object",
        "properties": {
            "additionalProperties": {"type": "string"},
            "when": {"type": "object", "properties": {"h": {"type": "integer"}},
                     "description": "local time"},
            "tags": {"type": "array", "items": {"type": "string", "nullable": True}},
            "mode": {"enum": [{"additionalProperties": 1}], "default": {"const": 2}},
        },
    }  # fmt: skip
    assert removed == {
        "$schema": ["the root"],
        "additionalProperties": ["the root", "properties.when"],
        "const": ["properties.additionalProperties"],
        "exclusiveMinimum": ["properties.when.properties.h"],
        "uniqueItems": ["properties.tags.items"],
    }  # every $ref was inlined, so removing $defs lost nothing
    assert NESTED["additionalProperties"] is False  # the caller's schema is untouched


def test_cleanup_reports_a_recursive_ref_it_could_not_inline() -> None:
    node = {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": node},
    }
    cleaned, removed = cleanup(remove=["$ref", "$defs"], inline_refs=True).clean(schema)
    assert cleaned["properties"]["node"] == {"type": "object", "properties": {"next": {}}}
    assert set(removed) == {"$ref", "$defs"}


def test_cleanup_leaves_a_clean_schema_and_request_as_they_are() -> None:
    stage = cleanup(remove=["additionalProperties"])
    req = request()
    assert stage.rewrite(req, make_call()) is req
    cleaned, removed = stage.clean(WEATHER.input_schema)
    assert cleaned is WEATHER.input_schema and removed == {}


def test_cleanup_logs_one_structured_warn_per_tool_and_keyword(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tool = ToolDefinition(name="t", input_schema=NESTED)
    req = request(tools=[tool, WEATHER], output_schema=NESTED)
    stage = cleanup(remove=["additionalProperties"], output_schema=True)
    schema_cleanup._warned.clear()  # warned of once per process
    with caplog.at_level(logging.WARNING, logger="metis"):
        out = stage.rewrite(req, make_call(provider="toy"))
    records = [r for r in caplog.records if getattr(r, "event", None) == "metis.schema_cleanup"]
    assert [(r.tool, r.keyword, r.paths) for r in records] == [  # type: ignore[attr-defined]
        ("t", "additionalProperties", ["the root", "$defs.Time"]),
        (None, "additionalProperties", ["the root", "$defs.Time"]),
    ]
    assert "additionalProperties" not in out.tools[0].input_schema
    assert out.tools[1] is WEATHER
    assert out.output_schema is not None and "additionalProperties" not in out.output_schema


def test_cleanup_options_are_checked_when_the_stack_is_built() -> None:
    with pytest.raises(StackError, match="unknown option 'remvoe'"):
        SchemaCleanup(remvoe=["x"])
