"""Strict tools (docs/contract.md §10): ``ToolDefinition.strict`` as Anthropic's
``tools[].strict``, Bedrock Converse's ``toolSpec.strict`` and OpenAI's ``function.strict``,
each object of the schema closed where the API wants it; on a model or stack without strict
tool use the flag is left out with the dropped-content WARN, and the tool still goes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import metis
from metis.catalog.capabilities import model_capabilities
from metis.catalog.model_info import ModelInfo
from metis.errors import InvalidRequestError
from metis.gateway.inbound import tool_definition
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.request import WireRequest
from metis.stacks.loader import load_stack
from metis.stages.edits.strict_schema import StrictSchema
from metis.testing.emulator import Emulator
from metis.testing.emulator.formats import strict_tools as emulated
from metis.testing.emulator.rules import Refused
from metis.wire import anthropic
from metis.wire.bedrock_converse import encode as converse_encode
from metis.wire.closed_schema import MAX_DEPTH, closed_schema_or_reason
from metis.wire.openai_chat import codec as chat

from .. import stack_table as platforms
from ..helpers import drive, recording_call

pytestmark = [pytest.mark.usefixtures("no_backoff"), pytest.mark.anyio]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
        "stops": {"type": "array", "items": {"type": "object", "properties": {}}},
    },
    "required": ["city"],
}
CLOSED = {
    **SCHEMA,
    "additionalProperties": False,
    "properties": {
        "city": {"type": "string"},
        "where": {**SCHEMA["properties"]["where"], "additionalProperties": False},
        "stops": {
            "type": "array",
            "items": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
}
STRICT = ToolDefinition(name="get_weather", input_schema=SCHEMA, strict=True)
LOOSE = ToolDefinition(name="lookup", input_schema=SCHEMA)
OPEN_ENDED = ToolDefinition(
    name="tag",
    input_schema={"type": "object", "additionalProperties": {"type": "string"}},
    strict=True,
)


def _request(
    *tools: ToolDefinition, model: str = "anthropic:claude-sonnet-4-5"
) -> CanonicalRequest:
    return CanonicalRequest(
        model=model, messages=[Message.user("Weather?")], tools=list(tools), max_output_tokens=64
    )


def test_anthropic_sends_strict_with_every_object_closed_and_optional_keys_kept() -> None:
    call = recording_call()
    body = anthropic.encode(_request(STRICT, LOOSE), call)
    strict, loose = body["tools"]
    assert strict == {"name": "get_weather", "input_schema": CLOSED, "strict": True}
    assert strict["input_schema"]["required"] == ["city"]  # optional keys stay optional
    assert loose == {"name": "lookup", "input_schema": SCHEMA}  # no flag: sent as written
    assert "additionalProperties" not in SCHEMA  # the caller's schema is not touched
    assert call.dropped == []


def test_converse_sends_strict_on_the_tool_spec() -> None:
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    body = converse_encode(_request(STRICT, LOOSE), call)
    strict, loose = (t["toolSpec"] for t in body["toolConfig"]["tools"])
    assert strict == {"name": "get_weather", "inputSchema": {"json": CLOSED}, "strict": True}
    assert loose == {"name": "lookup", "inputSchema": {"json": SCHEMA}}


@pytest.mark.parametrize(
    "encode", [anthropic.encode, converse_encode], ids=["anthropic", "bedrock"]
)
def test_a_schema_that_takes_unnamed_keys_goes_without_strict_and_says_so(encode: Any) -> None:
    call = recording_call()
    body = encode(_request(OPEN_ENDED), call)
    sent = body["tools"][0] if "tools" in body else body["toolConfig"]["tools"][0]["toolSpec"]
    assert "strict" not in sent
    [(block_type, reason, _)] = call.dropped
    assert block_type == "tool.strict"
    assert "'tag'" in reason and "additionalProperties" in reason


def test_a_schema_nested_past_the_limit_is_not_made_strict_and_never_recurses_out() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5 * MAX_DEPTH):
        schema = {"type": "object", "properties": {"x": schema}}
    closed, reason = closed_schema_or_reason(schema)
    assert closed is None and reason is not None and "nested more than" in reason
    assert closed_schema_or_reason([1]) == (None, "the schema is not a JSON object")


def test_every_subschema_form_is_closed() -> None:
    item = {"type": "object", "properties": {}}
    schema = {
        "type": "object",
        "properties": {"a": {"anyOf": [item, {"type": "null"}]}},
        "$defs": {"D": item},
        "definitions": {"E": item},
    }
    closed, _ = closed_schema_or_reason(schema)
    assert closed is not None
    assert emulated.open_object(closed) is None
    assert emulated.open_object(schema) == "/"


def test_openai_chat_sends_the_flag_given_and_the_stage_keeps_false_as_false() -> None:
    off = ToolDefinition(name="off", input_schema=SCHEMA, strict=False)
    body = chat.encode(_request(off, STRICT, LOOSE), recording_call("openai", "openai:gpt-4o"))
    flags = [t["function"].get("strict", "absent") for t in body["tools"]]
    assert flags == [False, True, "absent"]


async def test_openai_strict_asked_for_but_not_expressible_is_dropped_with_the_warn() -> None:
    call = recording_call("openai", "openai:gpt-4o")
    body = chat.encode(_request(OPEN_ENDED, STRICT), call)
    stage = StrictSchema()
    [sent], _ = await drive(stage, WireRequest(url="u", body=body), call)
    tag, weather = (t["function"] for t in sent.body["tools"])
    assert "strict" not in tag
    assert weather["strict"] is True
    assert call.dropped_types == ["tool.strict"]


def test_a_model_without_structured_output_has_no_strict_tools() -> None:
    declared = AdapterCapabilities(
        supports_tools=True, supports_structured_output=True, supports_strict_tools=True
    )
    narrowed = model_capabilities(
        declared, ModelInfo(provider="p", id="m", structured_output=False)
    )
    assert narrowed.supports_strict_tools is False
    unknown = model_capabilities(declared, ModelInfo(provider="p", id="m"))
    assert unknown.supports_strict_tools is True  # what the catalog does not know: the stack's


@pytest.mark.parametrize(
    ("stack", "strict"),
    [
        ("anthropic", True),
        ("bedrock", True),
        ("bedrock_anthropic", True),
        ("vertex_anthropic", True),
        ("openai", True),
        ("azure", True),
        ("openai_responses", True),
        ("gemini", False),
        ("groq", False),
    ],
)
def test_which_stacks_declare_strict_tools(stack: str, strict: bool) -> None:
    assert load_stack(stack).capabilities.supports_strict_tools is strict


@pytest.mark.parametrize("stack", ["anthropic", "bedrock", "bedrock_anthropic", "openai", "gemini"])
async def test_a_strict_tool_on_every_stack_is_sent_or_reported_and_the_call_answers(
    stack: str,
) -> None:
    model = {"bedrock": "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"}.get(stack)
    request = platforms.request(stack, tools=[STRICT])
    request = request.model_copy(update={"model": model or request.model})
    with Emulator() as emulator:
        async with platforms.adapter(stack, emulator) as adapter:
            response = await adapter.complete(request)
    dropped = [w.block_type for w in response.warnings]
    assert response.stop_reason.kind == "tool_use"
    assert dropped == ([] if stack != "gemini" else ["tool.strict"])


def test_the_emulator_refuses_a_strict_tool_whose_objects_are_open() -> None:
    with pytest.raises(Refused, match="additionalProperties' must be explicitly set to false"):
        emulated.check_anthropic(
            {"tools": [{"name": "t", "input_schema": SCHEMA, "strict": True}]}, None
        )
    emulated.check_anthropic({"tools": [{"name": "t", "input_schema": SCHEMA}]}, None)
    spec = {"toolSpec": {"name": "t", "inputSchema": {"json": SCHEMA}, "strict": True}}
    with pytest.raises(Refused, match="must set additionalProperties to false"):
        emulated.check_converse({"toolConfig": {"tools": [spec]}}, None)


def test_metis_tool_takes_strict_for_functions_and_models() -> None:
    @metis.tool(strict=True)
    def get_weather(city: str) -> str:
        """Current weather."""
        return city

    class City(BaseModel):
        name: str

    assert get_weather.definition.strict is True
    assert metis.Tool.from_model(City, strict=False).definition.strict is False
    assert metis.tool(get_weather.function).definition.strict is None


def test_the_gateway_reads_a_clients_strict_flag() -> None:
    assert tool_definition("t", "", SCHEMA, "tools[0]", True).strict is True
    assert tool_definition("t", "", SCHEMA, "tools[0]").strict is None
    with pytest.raises(InvalidRequestError, match=r"tools\[0\]\.strict: expected a boolean"):
        tool_definition("t", "", SCHEMA, "tools[0]", "yes")


def test_a_strict_tool_survives_a_session_round_trip() -> None:
    request = _request(STRICT)
    again = CanonicalRequest.model_validate_json(request.model_dump_json())
    assert again.tools[0].strict is True


def test_the_warn_names_the_flag_dropped_and_the_tool(caplog: pytest.LogCaptureFixture) -> None:
    from metis.model.tool_fit import fit_strict_tools

    call = recording_call("gemini", "gemini:gemini-2.5-flash")
    caps = AdapterCapabilities(supports_tools=True)
    request = fit_strict_tools(_request(STRICT, LOOSE), caps, call.warn_dropped)
    assert [t.strict for t in request.tools] == [None, None]
    [record] = [r for r in caplog.records if r.name == "metis"]
    assert record.getMessage() == (  # a setting, not a content block: no "block" in it
        "dropped tool.strict for gemini: tool 'get_weather': the model has no strict tool use; "
        "the tool is sent without it"
    )


class Pet(BaseModel):
    name: str
    owner: Owner | None = None


class Owner(BaseModel):
    name: str


Pet.model_rebuild()


@pytest.mark.parametrize("stack", ["anthropic", "bedrock_anthropic", "vertex_anthropic"])
async def test_anthropic_structured_output_closes_every_object_and_the_api_takes_it(
    stack: str,
) -> None:
    request = platforms.request(stack, "A pet?", tools=[], output_schema=Pet.model_json_schema())
    with Emulator() as emulator:
        async with platforms.adapter(stack, emulator) as adapter:
            response = await adapter.complete(request)
        [sent] = emulator.bodies(platforms.target(stack))
    Pet.model_validate_json(response.text)
    schema = sent["output_config"]["format"]["schema"]
    assert emulated.open_object(schema) is None
    assert schema["$defs"]["Owner"]["additionalProperties"] is False
    assert schema["required"] == ["name"]  # optional keys stay optional


def test_an_output_schema_that_cannot_be_closed_is_refused_before_sending() -> None:
    from metis.wire.anthropic.rules import parameter_problems

    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    body = anthropic.encode(
        _request().model_copy(update={"output_schema": schema}), recording_call()
    )
    assert body["output_config"]["format"]["schema"] == schema  # as written, for the check
    [problem] = parameter_problems(body)
    assert problem.startswith("output_config.format.schema: /: takes keys it does not name")


def test_on_converse_only_the_models_the_catalog_says_have_structured_output_get_strict() -> None:
    from metis.catalog.capabilities import uncatalogued_capabilities

    converse = load_stack("bedrock").capabilities
    nova = model_capabilities(converse, ModelInfo(provider="amazon-bedrock", id="amazon.nova-pro"))
    claude = ModelInfo(provider="amazon-bedrock", id="c", structured_output=True)
    assert nova.supports_strict_tools is False  # the catalog does not say: not sent
    assert model_capabilities(converse, claude).supports_strict_tools is True
    assert uncatalogued_capabilities(converse, "amazon-bedrock", "x").supports_strict_tools is False
    anthropic_api = load_stack("anthropic").capabilities  # strict wherever structured output is
    assert model_capabilities(
        anthropic_api, ModelInfo(provider="anthropic", id="m")
    ).supports_strict_tools


def test_on_converse_structured_output_is_per_model_as_strict_tools_are() -> None:
    from metis.catalog.capabilities import uncatalogued_capabilities

    converse = load_stack("bedrock").capabilities
    nova = model_capabilities(converse, ModelInfo(provider="amazon-bedrock", id="amazon.nova-pro"))
    claude = ModelInfo(provider="amazon-bedrock", id="c", structured_output=True)
    assert nova.supports_structured_output is False
    assert model_capabilities(converse, claude).supports_structured_output is True
    uncatalogued = uncatalogued_capabilities(converse, "amazon-bedrock", "x")
    assert uncatalogued.supports_structured_output is False


def test_converse_sends_the_output_schema_closed_as_a_json_string_named_by_its_title() -> None:
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    schema = {**SCHEMA, "title": "Weather report", "description": "Today's weather."}
    body = converse_encode(_request().model_copy(update={"output_schema": schema}), call)
    fmt = body["outputConfig"]["textFormat"]
    definition = fmt["structure"]["jsonSchema"]
    assert fmt["type"] == "json_schema"
    assert definition["name"] == "Weather_report"
    assert definition["description"] == "Today's weather."
    import json

    sent = json.loads(definition["schema"])
    assert emulated.open_object(sent) is None
    assert sent["properties"] == CLOSED["properties"] and sent["required"] == ["city"]
    assert schema["properties"]["where"].get("additionalProperties") is None  # not changed


def test_a_converse_output_schema_that_cannot_be_closed_is_refused_before_sending() -> None:
    from metis.wire.bedrock_converse.rules import converse_problems

    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    body = converse_encode(_request().model_copy(update={"output_schema": schema}), call)
    [problem] = converse_problems(body)
    assert problem.startswith("outputConfig.textFormat.structure.jsonSchema.schema: /: takes")
    with pytest.raises(Refused, match="additionalProperties"):
        emulated.check_converse(body, None)


async def test_structured_output_on_converse_through_the_emulator() -> None:
    request = platforms.request(
        "bedrock", "A pet?", tools=[], output_schema=Pet.model_json_schema()
    )
    request = request.model_copy(
        update={"model": "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    )
    with Emulator() as emulator:
        async with platforms.adapter("bedrock", emulator) as adapter:
            response = await adapter.complete(request)
        [sent] = emulator.bodies(platforms.target("bedrock"))
    Pet.model_validate_json(response.text)
    assert "outputConfig" in sent


async def test_a_converse_model_without_structured_output_is_refused_before_sending() -> None:
    request = platforms.request("bedrock", "A pet?", tools=[], output_schema=SCHEMA)
    request = request.model_copy(update={"model": "bedrock:amazon.nova-pro-v1:0"})
    with Emulator() as emulator:
        async with platforms.adapter("bedrock", emulator) as adapter:
            with pytest.raises(metis.CapabilityError, match="output schema"):
                await adapter.complete(request)
        assert emulator.bodies(platforms.target("bedrock")) == []


def test_a_tools_closed_schema_is_made_once_and_copied_for_a_body_of_its_own() -> None:
    from metis.wire.closed_schema import strict_input_schema
    from metis.wire.encoded_messages import made_fresh

    tool = ToolDefinition(name="get", input_schema=_copy(SCHEMA), strict=True)
    first, strict = strict_input_schema(tool, recording_call())
    again, _ = strict_input_schema(tool, recording_call())
    assert strict and first is again and first == closed_schema_or_reason(SCHEMA)[0]
    with made_fresh():  # an application's own stage follows encode: its own copy
        own, _ = strict_input_schema(tool, recording_call())
    assert own == first and own is not first
    tool.input_schema["properties"]["extra"] = {"type": "string"}  # changed in place: anew
    changed, _ = strict_input_schema(tool, recording_call())
    assert changed is not first and "extra" in changed["properties"]


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(value)
