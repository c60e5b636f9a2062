"""The strict_schema stage: OpenAI strict-mode conversion and null-stripping on the way out."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from metis.errors import StackError
from metis.model.content import TextBlock, ToolUseBlock
from metis.model.events import MessageComplete, StreamEvent, TextDelta, ToolUseEnd
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.pipeline.registry import stages
from metis.pipeline.request import WireRequest
from metis.stages.edits.strict_schema import StrictSchema, strict_schema_or_reason, to_strict_schema

from ..helpers import make_call

READ = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string", "description": "Absolute path"},
        "offset": {"type": "number", "description": "Line to start at"},
        "limit": {"type": "number"},
    },
    "required": ["file_path"],
}


def _call() -> Any:
    return make_call(provider="openai", model="openai:m")


def _request(body: dict[str, Any], stream: bool = True) -> WireRequest:
    return WireRequest(url="https://api.openai.com/v1/chat/completions", body=body, stream=stream)


def _tool(name: str, parameters: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, **extra}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


async def _drive(
    stage: StrictSchema, request: WireRequest, events: list[StreamEvent], call: Any = None
) -> tuple[list[WireRequest], list[StreamEvent]]:
    captured: list[WireRequest] = []

    async def inner(req: WireRequest, call: Any) -> Any:
        captured.append(req)
        for event in events:
            yield event

    out = [event async for event in stage(request, call or _call(), inner)]
    return captured, out


def _complete(*blocks: Any) -> MessageComplete:
    return MessageComplete(
        final_content=list(blocks),
        stop_reason=StopReason(kind=StopKind.TOOL_USE, raw="tool_calls"),
        usage=TokenUsage(input_tokens=1, output_tokens=1),
    )


# to_strict_schema ----------------------------------------------------------------------


def test_seed_example_read_tool() -> None:
    assert to_strict_schema(READ) == {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path"},
            "offset": {"type": ["number", "null"], "description": "Line to start at"},
            "limit": {"type": ["number", "null"]},
        },
        "required": ["file_path", "offset", "limit"],
        "additionalProperties": False,
    }


def test_input_is_not_modified_and_not_shared() -> None:
    schema = {
        "type": "object",
        "properties": {"mode": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "integer"}},
        "required": ["mode"],
    }
    before = copy.deepcopy(schema)
    out = to_strict_schema(schema)
    assert schema == before
    assert out is not None
    out["properties"]["mode"]["enum"].append("c")
    assert schema == before


def test_empty_properties_is_convertible() -> None:
    assert to_strict_schema({"type": "object", "properties": {}}) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_explicitly_closed_object_without_properties() -> None:
    assert to_strict_schema({"type": "object", "additionalProperties": False}) == {
        "type": "object",
        "additionalProperties": False,
        "properties": {},
        "required": [],
    }


def test_nested_object_in_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "opts": {
                "type": "object",
                "properties": {"deep": {"type": "boolean"}, "name": {"type": "string"}},
                "required": ["name"],
            }
        },
        "required": ["opts"],
    }
    out = to_strict_schema(schema)
    assert out is not None
    opts = out["properties"]["opts"]
    assert opts == {
        "type": "object",
        "properties": {"deep": {"type": ["boolean", "null"]}, "name": {"type": "string"}},
        "required": ["deep", "name"],
        "additionalProperties": False,
    }


def test_optional_nested_object_becomes_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {"opts": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    out = to_strict_schema(schema)
    assert out is not None
    assert out["properties"]["opts"]["type"] == ["object", "null"]
    assert out["properties"]["opts"]["required"] == ["x"]
    assert out["properties"]["opts"]["properties"]["x"] == {"type": ["integer", "null"]}


def test_object_in_array_items() -> None:
    schema = {
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {"old": {"type": "string"}, "all": {"type": "boolean"}},
                    "required": ["old"],
                },
            }
        },
        "required": ["edits"],
    }
    out = to_strict_schema(schema)
    assert out is not None
    edits = out["properties"]["edits"]
    assert edits["type"] == "array"
    assert edits["minItems"] == 1
    assert edits["items"] == {
        "type": "object",
        "properties": {"old": {"type": "string"}, "all": {"type": ["boolean", "null"]}},
        "required": ["old", "all"],
        "additionalProperties": False,
    }


def test_defs_and_ref() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x"],
            }
        },
        "properties": {
            "start": {"$ref": "#/$defs/Point"},
            "end": {"$ref": "#/$defs/Point", "description": "where to stop"},
        },
        "required": ["start"],
    }
    out = to_strict_schema(schema)
    assert out is not None
    assert out["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": ["number", "null"]}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert out["properties"]["start"] == {"$ref": "#/$defs/Point"}
    assert out["properties"]["end"] == {
        "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}],
        "description": "where to stop",
    }
    assert out["required"] == ["start", "end"]


def test_definitions_are_converted_too() -> None:
    schema = {
        "type": "object",
        "definitions": {"Tag": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "properties": {"tag": {"$ref": "#/definitions/Tag"}},
        "required": ["tag"],
    }
    out = to_strict_schema(schema)
    assert out is not None
    assert out["definitions"]["Tag"]["additionalProperties"] is False
    assert out["definitions"]["Tag"]["properties"]["k"] == {"type": ["string", "null"]}


def test_any_of() -> None:
    schema = {
        "type": "object",
        "properties": {
            "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "shape": {
                "anyOf": [
                    {"type": "object", "properties": {"r": {"type": "number"}}},
                    {"type": "string"},
                ]
            },
        },
        "required": ["shape"],
    }
    out = to_strict_schema(schema)
    assert out is not None
    assert out["properties"]["value"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]
    }
    circle = out["properties"]["shape"]["anyOf"][0]
    assert circle["additionalProperties"] is False
    assert circle["properties"]["r"] == {"type": ["number", "null"]}
    assert len(out["properties"]["shape"]["anyOf"]) == 2  # required: not made nullable


def test_enum_made_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "typed": {"type": "string", "enum": ["asc", "desc"]},
            "bare": {"enum": [1, 2]},
        },
    }
    out = to_strict_schema(schema)
    assert out is not None
    assert out["properties"]["typed"] == {"type": ["string", "null"], "enum": ["asc", "desc", None]}
    assert out["properties"]["bare"] == {"enum": [1, 2, None]}


def test_const_made_nullable() -> None:
    out = to_strict_schema(
        {"type": "object", "properties": {"k": {"type": "string", "const": "x"}}}
    )
    assert out is not None
    assert out["properties"]["k"] == {"anyOf": [{"type": "string", "const": "x"}, {"type": "null"}]}


def test_already_nullable_is_not_duplicated() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "c": {"type": ["string", "null"], "enum": ["x", None]},
            "d": {"type": "null"},
        },
    }
    out = to_strict_schema(schema)
    assert out is not None
    assert out["properties"] == schema["properties"]
    assert out["required"] == ["a", "b", "c", "d"]


def test_nullable_type_with_enum_lacking_null() -> None:
    schema = {"type": "object", "properties": {"e": {"type": ["string", "null"], "enum": ["x"]}}}
    out = to_strict_schema(schema)
    assert out is not None
    assert out["properties"]["e"] == {"type": ["string", "null"], "enum": ["x", None]}


def test_annotations_strict_mode_rejects_are_dropped() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "title": "Args",
        "properties": {
            "n": {"type": "integer", "default": 10, "examples": [3], "minimum": 1},
            "s": {"type": "string", "description": "d", "x-internal": True},
        },
        "required": ["n", "s"],
    }
    out = to_strict_schema(schema)
    assert out == {
        "type": "object",
        "title": "Args",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "s": {"type": "string", "description": "d"},
        },
        "required": ["n", "s"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "object"}, id="free-form-dict"),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": True,
            },
            id="additionalProperties-true",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            id="additionalProperties-schema",
        ),
        pytest.param(
            {"type": "object", "properties": {"meta": {"type": "object"}}}, id="nested-free-form"
        ),
        pytest.param(
            {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
            id="patternProperties",
        ),
        pytest.param(
            {"type": "object", "properties": {"v": {"oneOf": [{"type": "string"}]}}}, id="oneOf"
        ),
        pytest.param(
            {"type": "object", "properties": {"v": {"type": "string", "not": {"const": "x"}}}},
            id="not",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "if": {"required": ["a"]},
                "then": {"required": ["a"]},
            },
            id="if-then",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "dependentRequired": {"a": ["b"]},
            },
            id="dependentRequired",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}},
            id="unsupported-constraint",
        ),
        pytest.param({"type": "object", "properties": {"a": {}}}, id="any-value"),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "array"}}}, id="array-without-items"
        ),
        pytest.param({"anyOf": [{"type": "object", "properties": {}}]}, id="root-not-object"),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "a": {
                        "allOf": [
                            {"type": "object", "properties": {"x": {"type": "string"}}},
                            {"type": "object", "properties": {"y": {"type": "string"}}},
                        ]
                    }
                },
            },
            id="allOf-several",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
            id="required-undefined",
        ),
        pytest.param(  # was a bare TypeError (None in "abc")
            {"type": "object", "properties": {"a": {"enum": "abc"}}},
            id="enum-not-a-list",
        ),
    ],
)
def test_not_convertible(schema: dict[str, Any]) -> None:
    before = copy.deepcopy(schema)
    assert to_strict_schema(schema) is None
    converted, reason = strict_schema_or_reason(schema)
    assert converted is None and reason
    assert schema == before


# The stage: request side ---------------------------------------------------------------


@pytest.mark.anyio
async def test_stage_makes_convertible_tools_strict_and_logs_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    free = {"type": "object", "properties": {"meta": {"type": "object"}}}
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [_tool("Read", READ), _tool("Free", free)],
    }
    before = copy.deepcopy(body)
    with caplog.at_level(logging.INFO, logger="metis"):
        captured, _ = await _drive(StrictSchema(), _request(body), [])
    sent = captured[0].body
    read, free_tool = sent["tools"]
    assert read["function"]["strict"] is True
    assert read["function"]["parameters"] == to_strict_schema(READ)
    assert free_tool == before["tools"][1]
    assert "strict" not in free_tool["function"]
    assert body == before  # the incoming body is untouched
    records = [r for r in caplog.records if r.name == "metis"]
    assert len(records) == 1
    assert records[0].levelno == logging.INFO
    assert "Free" in records[0].getMessage()
    assert "free-form" in records[0].getMessage()


@pytest.mark.anyio
async def test_stage_leaves_explicit_non_strict_and_other_tools_alone() -> None:
    body = {
        "tools": [
            _tool("Read", READ, strict=False),
            {"type": "custom", "custom": {"name": "x"}},
        ]
    }
    request = _request(body)
    captured, _ = await _drive(StrictSchema(), request, [])
    assert captured[0] is request


@pytest.mark.anyio
async def test_stage_tool_without_parameters_is_the_empty_object() -> None:
    captured, _ = await _drive(StrictSchema(), _request({"tools": [_tool("Now", None)]}), [])
    function = captured[0].body["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.anyio
async def test_stage_response_format() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["answer"],
    }
    body = {
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    }
    before = copy.deepcopy(body)
    captured, _ = await _drive(StrictSchema(), _request(body), [])
    spec = captured[0].body["response_format"]["json_schema"]
    assert spec["strict"] is True
    assert spec["name"] == "a"
    assert spec["schema"] == to_strict_schema(schema)
    assert body == before


@pytest.mark.anyio
async def test_stage_response_format_not_convertible(caplog: pytest.LogCaptureFixture) -> None:
    body = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object"}},
        }
    }
    request = _request(body)
    with caplog.at_level(logging.INFO, logger="metis"):
        captured, _ = await _drive(StrictSchema(), request, [])
    assert captured[0] is request
    assert "strict" not in captured[0].body["response_format"]["json_schema"]
    assert any("'a'" in r.getMessage() for r in caplog.records if r.name == "metis")


@pytest.mark.anyio
async def test_stage_ignores_json_object_format() -> None:
    request = _request({"response_format": {"type": "json_object"}})
    captured, _ = await _drive(StrictSchema(), request, [])
    assert captured[0] is request


@pytest.mark.anyio
async def test_stage_options_turn_parts_off() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = {
        "tools": [_tool("Read", READ)],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    }
    captured, _ = await _drive(StrictSchema(tools=False), _request(body), [])
    assert captured[0].body["tools"] == body["tools"]
    assert captured[0].body["response_format"]["json_schema"]["strict"] is True

    captured, _ = await _drive(StrictSchema(response_format=False), _request(body), [])
    assert captured[0].body["tools"][0]["function"]["strict"] is True
    assert captured[0].body["response_format"] == body["response_format"]


def test_unknown_option_names_the_stage() -> None:
    with pytest.raises(StackError, match="strict_schema"):
        StrictSchema(bogus=True)


def test_registered_and_typed() -> None:
    assert stages.get("strict_schema") is StrictSchema
    signature = StrictSchema.signature()
    assert signature.request_in is WireRequest
    assert signature.items_in is StreamEvent
    assert signature.items_out is StreamEvent


# The stage: response side --------------------------------------------------------------


@pytest.mark.anyio
async def test_tool_use_end_nulls_of_optional_keys_removed() -> None:
    end = ToolUseEnd(
        content_block_index=0,
        tool_use_id="call_1",
        tool_name="Read",
        final_input={"file_path": "/a", "offset": None, "limit": 10},
    )
    before = end.to_dict()
    _, out = await _drive(StrictSchema(), _request({"tools": [_tool("Read", READ)]}), [end])
    (cleaned,) = out
    assert isinstance(cleaned, ToolUseEnd) and cleaned is not end
    assert cleaned.final_input == {"file_path": "/a", "limit": 10}
    assert (cleaned.tool_use_id, cleaned.tool_name, cleaned.content_block_index) == (
        "call_1",
        "Read",
        0,
    )
    assert end.to_dict() == before  # the event from inside is not changed: a new one is yielded


@pytest.mark.anyio
async def test_required_key_that_is_null_stays() -> None:
    end = ToolUseEnd(
        content_block_index=0,
        tool_use_id="call_1",
        tool_name="Read",
        final_input={"file_path": None, "offset": None, "limit": None},
    )
    _, out = await _drive(StrictSchema(), _request({"tools": [_tool("Read", READ)]}), [end])
    (cleaned,) = out
    assert isinstance(cleaned, ToolUseEnd) and cleaned.final_input == {"file_path": None}


@pytest.mark.anyio
async def test_nested_nulls_removed_via_properties_items_and_refs() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Edit": {
                "type": "object",
                "properties": {"old": {"type": "string"}, "all": {"type": "boolean"}},
                "required": ["old"],
            }
        },
        "properties": {
            "opts": {
                "type": "object",
                "properties": {"deep": {"type": "boolean"}, "name": {"type": "string"}},
                "required": ["name"],
            },
            "edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}},
        },
        "required": ["opts", "edits"],
    }
    end = ToolUseEnd(
        content_block_index=0,
        tool_use_id="c",
        tool_name="Edit",
        final_input={
            "opts": {"deep": None, "name": None},
            "edits": [{"old": "a", "all": None}, {"old": None, "all": True}],
        },
    )
    _, out = await _drive(StrictSchema(), _request({"tools": [_tool("Edit", schema)]}), [end])
    (cleaned,) = out
    assert isinstance(cleaned, ToolUseEnd)
    assert cleaned.final_input == {
        "opts": {"name": None},
        "edits": [{"old": "a"}, {"old": None, "all": True}],
    }


@pytest.mark.anyio
async def test_message_complete_tool_use_blocks_cleaned() -> None:
    block = ToolUseBlock(id="call_1", name="Read", input={"file_path": "/a", "offset": None})
    other = ToolUseBlock(id="call_2", name="Other", input={"x": None})
    text = TextBlock(text="reading")
    complete = _complete(text, block, other)
    content = complete.final_content
    body = {"tools": [_tool("Read", READ), _tool("Other", {"type": "object"})]}
    _, out = await _drive(StrictSchema(), _request(body), [complete])
    (cleaned,) = out
    assert isinstance(cleaned, MessageComplete) and cleaned is not complete
    assert complete.final_content is content  # the event from inside is not changed
    assert (cleaned.stop_reason, cleaned.usage) == (complete.stop_reason, complete.usage)
    final = cleaned.final_content
    assert final[0] is text
    assert isinstance(final[1], ToolUseBlock)
    assert final[1].input == {"file_path": "/a"}
    assert final[1].id == "call_1"
    assert final[2] is other  # not made strict: untouched
    assert block.input == {"file_path": "/a", "offset": None}
    assert content[1] is block  # the original list was not changed in place


@pytest.mark.anyio
async def test_only_tools_made_strict_are_cleaned() -> None:
    free = {"type": "object", "properties": {"meta": {"type": "object"}, "n": {"type": "integer"}}}
    end = ToolUseEnd(
        content_block_index=0, tool_use_id="c", tool_name="Free", final_input={"n": None}
    )
    body = {"tools": [_tool("Read", READ), _tool("Free", free)]}
    _, out = await _drive(StrictSchema(), _request(body), [end])
    assert out == [end] and out[0] is end
    assert end.final_input == {"n": None}


@pytest.mark.anyio
async def test_nothing_strict_hands_back_inner_stream() -> None:
    delta = TextDelta(content_block_index=0, text="hi")
    events: list[StreamEvent] = [delta]
    request = _request({"messages": []})
    captured: list[WireRequest] = []

    async def inner(req: WireRequest, call: Any) -> Any:
        captured.append(req)
        for event in events:
            yield event

    stream = StrictSchema()(request, _call(), inner)
    assert [e async for e in stream] == [delta]
    assert captured == [request]


@pytest.mark.anyio
async def test_other_events_pass_through() -> None:
    delta = TextDelta(content_block_index=0, text="hi")
    end = ToolUseEnd(
        content_block_index=1, tool_use_id="c", tool_name="Read", final_input={"file_path": "/x"}
    )
    final_input = end.final_input
    _, out = await _drive(StrictSchema(), _request({"tools": [_tool("Read", READ)]}), [delta, end])
    assert out == [delta, end]
    assert out[0] is delta and delta.text == "hi"
    assert out[1] is end  # nothing to remove: the same event
    assert end.final_input is final_input  # nothing to remove: the same dict


@pytest.mark.anyio
async def test_a_schema_converted_before_is_the_same_strict_schema_and_a_new_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = StrictSchema()
    schema = copy.deepcopy(READ)
    bodies = []
    for _ in range(2):
        captured, _ = await _drive(stage, _request({"tools": [_tool("Read", schema)]}), [])
        bodies.append(captured[0].body)
    first, second = (body["tools"][0]["function"]["parameters"] for body in bodies)
    assert first is second and first == to_strict_schema(READ)  # made once for the schema
    made_anew, _ = await _drive(stage, _request({"tools": [_tool("Read", READ)]}), [])
    assert made_anew[0].body["tools"][0]["function"]["parameters"] == first  # equal, its own
    schema["properties"]["limit"]["type"] = "string"  # the schema changed in place: anew
    changed, _ = await _drive(stage, _request({"tools": [_tool("Read", schema)]}), [])
    assert changed[0].body["tools"][0]["function"]["parameters"] == to_strict_schema(schema)
    stage.fresh_wire = True  # an application's stage follows: each body's strict schema its own
    bodies = []
    for _ in range(2):
        captured, _ = await _drive(stage, _request({"tools": [_tool("Read", READ)]}), [])
        bodies.append(captured[0].body)
    first, second = (body["tools"][0]["function"]["parameters"] for body in bodies)
    first["properties"]["limit"]["type"] = "string"  # an edit of one request's body ...
    assert second == to_strict_schema(READ)  # ... is not another's
    stage.fresh_wire = False
    third, _ = await _drive(stage, _request({"tools": [_tool("Read", READ)]}), [])
    assert third[0].body["tools"][0]["function"]["parameters"] == to_strict_schema(READ)
    loose = {"type": "object", "additionalProperties": {"type": "string"}}  # cannot be strict
    with caplog.at_level(logging.INFO, logger="metis"):
        for _ in range(2):
            captured, _ = await _drive(stage, _request({"tools": [_tool("Loose", loose)]}), [])
            assert "strict" not in captured[0].body["tools"][0]["function"]
    said = [r for r in caplog.records if "'Loose' left non-strict" in r.getMessage()]
    assert len(said) == 2  # said on every call, converted before or not
