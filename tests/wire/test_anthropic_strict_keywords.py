"""The keywords of a strict schema Anthropic's grammar refuses that its own SDK rewrites
(anthropic-sdk-python's ``transform_schema``): a string's ``minLength``/``maxLength``, an
array's ``maxItems`` and a ``minItems`` other than 0 or 1 go as words of the description, a
``oneOf`` goes as ``anyOf``; the rule the emulator refuses by
(metis/wire/anthropic/strict_limits.py) names each in Anthropic's words, and what the library
sends passes it."""

from __future__ import annotations

from typing import Any

import pytest

from metis.model import ToolDefinition
from metis.testing.emulator import Emulator
from metis.wire import anthropic
from metis.wire.anthropic.strict_limits import compile_problem, schema_problem
from metis.wire.bedrock_converse import encode as converse_encode
from metis.wire.closed_schema import closed_schema_or_reason

from .. import stack_table as platforms
from ..helpers import recording_call
from .test_strict_tools import _request

pytestmark = [pytest.mark.usefixtures("no_backoff"), pytest.mark.anyio]

TAGS = {"type": "array", "items": {"type": "string"}, "maxItems": 3, "description": "Tags"}
PICKS = {"type": "array", "items": {"type": "string"}, "minItems": 2}
NAME = {"type": "string", "minLength": 1, "maxLength": 40}
SHAPE = {
    "oneOf": [
        {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]},
        {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"]},
    ]
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tags": TAGS, "picks": PICKS, "name": NAME, "shape": SHAPE},
    "required": ["tags", "picks", "name", "shape"],
}
SENT_PROPERTIES = {
    "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags (maxItems: 3)"},
    "picks": {"type": "array", "items": {"type": "string"}, "description": "minItems: 2"},
    "name": {"type": "string", "description": "minLength: 1, maxLength: 40"},
    "shape": {
        "anyOf": [
            {**SHAPE["oneOf"][0], "additionalProperties": False},
            {**SHAPE["oneOf"][1], "additionalProperties": False},
        ]
    },
}
TOOL = ToolDefinition(name="draw", input_schema=SCHEMA, strict=True)


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "additionalProperties": False}


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        # BerriAI/litellm#39115, experientiallabs/experiential#804 (strict tools, 400)
        (TAGS, "For 'array' type, property 'maxItems' is not supported"),
        # ghostlobster/memorize-everything#93 (output_config.format, 400)
        (PICKS, "For 'array' type, 'minItems' values other than 0 or 1 are not supported"),
        ({"type": "string", "maxLength": 9}, "For 'string' type, property 'maxLength' is not"),
        # earendil-works/pi#9953: several limits of one schema named at once, in order
        (NAME, "For 'string' type, properties maxLength, minLength are not supported"),
        (
            {"type": "integer", "minimum": 1, "maximum": 9},
            "For 'integer' type, properties maximum, minimum are not supported",
        ),
        # strands-agents/harness-sdk#2664; "Schema type 'oneOf' is not supported" recorded live
        (SHAPE, "Schema type 'oneOf' is not supported"),
    ],
)
def test_the_rule_refuses_each_keyword_in_anthropics_words(schema: Any, said: str) -> None:
    problem = schema_problem(_closed({"type": "object", "properties": {"x": schema}}), [0, 0])
    assert problem is not None and problem.startswith(said)
    refused = compile_problem([("tools.0.custom", _closed({"type": "object", **SHAPE}))], 1)
    assert refused == "tools.0.custom: Schema type 'oneOf' is not supported"


@pytest.mark.parametrize("taken", [0, 1])
def test_a_min_items_of_zero_or_one_is_taken_and_sent_as_it_is(taken: int) -> None:
    schema = _closed({"type": "object", "properties": {"p": {**PICKS, "minItems": taken}}})
    assert schema_problem(schema, [0, 0]) is None
    closed, _ = closed_schema_or_reason(schema)
    assert closed == schema


def test_the_closed_schema_says_the_limits_in_words_and_takes_one_of_as_any_of() -> None:
    closed, reason = closed_schema_or_reason(SCHEMA)
    assert reason is None and closed is not None
    assert closed["properties"] == SENT_PROPERTIES
    assert schema_problem(closed, [0, 0]) is None  # what it sends, the compiler takes
    assert SCHEMA["properties"]["shape"] is SHAPE and "oneOf" in SHAPE  # the caller's untouched


def test_one_of_beside_any_of_cannot_be_made_strict_and_says_why() -> None:
    both = {"type": "object", "properties": {"x": {**SHAPE, "anyOf": [{"type": "null"}]}}}
    closed, reason = closed_schema_or_reason(both)
    assert closed is None
    assert reason == "/properties/x: takes oneOf beside anyOf (the grammar takes no oneOf)"


@pytest.mark.parametrize(
    "encode", [anthropic.encode, converse_encode], ids=["anthropic", "bedrock"]
)
def test_the_library_sends_the_tool_strict_as_anthropics_sdk_does(encode: Any) -> None:
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    body = encode(_request(TOOL), call)
    sent = body["tools"][0] if "tools" in body else body["toolConfig"]["tools"][0]["toolSpec"]
    schema = sent["input_schema"] if "input_schema" in sent else sent["inputSchema"]["json"]
    assert sent["strict"] is True
    assert schema["properties"] == SENT_PROPERTIES
    assert call.dropped == []


@pytest.mark.parametrize("stack", ["anthropic", "bedrock"])
async def test_the_strict_tool_goes_through_the_stack_and_claude_takes_it(stack: str) -> None:
    """The emulator refuses each keyword as Claude does (sent as written: a 400); sent as the
    library writes it, Claude answers."""
    model = {"bedrock": "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"}.get(stack)
    request = platforms.request(stack, tools=[TOOL])
    request = request.model_copy(update={"model": model or request.model})
    with Emulator() as emulator:
        async with platforms.adapter(stack, emulator) as adapter:
            response = await adapter.complete(request)
        [sent] = emulator.bodies(platforms.target(stack))
    assert response.warnings == []  # answered (not refused), nothing dropped
    tools = sent["tools"] if "tools" in sent else sent["toolConfig"]["tools"]
    spec = tools[0].get("toolSpec", tools[0])
    schema = spec["input_schema"] if "input_schema" in spec else spec["inputSchema"]["json"]
    assert spec["strict"] is True and schema["properties"] == SENT_PROPERTIES


NULLABLE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "age": {"type": ["integer", "null"], "minimum": 0, "description": "Age"},
        "nick": {"type": ["null", "string"], "maxLength": 12},
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "minItems": 2},
    },
    "required": ["age", "nick", "tags"],
}
NULLABLE_SENT = {
    "age": {"type": ["integer", "null"], "description": "Age (minimum: 0)"},
    "nick": {"type": ["null", "string"], "description": "maxLength: 12"},
    "tags": {"type": ["array", "null"], "items": {"type": "string"}, "description": "minItems: 2"},
}


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        (NULLABLE["properties"]["age"], "For 'integer' type, property 'minimum' is not supported"),
        (NULLABLE["properties"]["nick"], "For 'string' type, property 'maxLength' is not"),
        (NULLABLE["properties"]["tags"], "For 'array' type, 'minItems' values other than 0 or 1"),
        (
            {"type": ["string", "number"], "maxLength": 3, "maximum": 9, "minLength": 1},
            "For 'string' type, properties maxLength, minLength are not supported",
        ),
    ],
)
def test_a_limit_of_a_type_list_is_refused_as_the_limit_of_its_type(schema: Any, said: str) -> None:
    problem = schema_problem(_closed({"type": "object", "properties": {"x": schema}}), [0, 0])
    assert problem is not None and problem.startswith(said)


@pytest.mark.parametrize(
    "encode", [anthropic.encode, converse_encode], ids=["anthropic", "bedrock"]
)
def test_the_limits_of_a_type_list_go_as_words_and_the_compiler_takes_the_schema(
    encode: Any,
) -> None:
    """``"type": ["integer", "null"]`` with a ``minimum``: its limits are said in words, as
    for ``"type": "integer"`` (anthropic-sdk-typescript's transformJSONSchema keeps the list
    and says every keyword it does not send in the description)."""
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    tool = ToolDefinition(name="person", input_schema=NULLABLE, strict=True)
    body = encode(_request(tool), call)
    sent = body["tools"][0] if "tools" in body else body["toolConfig"]["tools"][0]["toolSpec"]
    schema = sent["input_schema"] if "input_schema" in sent else sent["inputSchema"]["json"]
    assert sent["strict"] is True and call.dropped == []
    assert schema["properties"] == NULLABLE_SENT
    assert schema_problem(schema, [0, 0]) is None
    assert NULLABLE["properties"]["age"]["minimum"] == 0  # the caller's schema untouched
