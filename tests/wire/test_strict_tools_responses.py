"""Strict tools on the Responses API (docs/contract.md §10): a tool that asks for strict goes
as ``tools[].strict: true`` with its schema in strict mode's form (the ``strict_schema`` stage),
the nulls strict mode makes the model send for optional keys taken out of its calls again; a
tool that does not ask goes ``strict: false`` (the API's default is strict); one whose schema
has no strict form goes ``strict: false`` with the dropped-content WARN. The emulator's
Responses rules take what is sent, and the call answers."""

from __future__ import annotations

from typing import Any

import pytest

from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.model.content import ToolUseBlock
from metis.model.events import MessageComplete, ToolUseEnd
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.pipeline.request import WireRequest
from metis.stages.edits.strict_schema import StrictSchema
from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.openai import strict_schema_problem
from metis.wire.openai_responses import OpenAIResponsesCodec
from metis.wire.strict_schema import to_strict_schema

from .. import stack_table as platforms
from ..helpers import drive, recording_call

pytestmark = [pytest.mark.usefixtures("no_backoff"), pytest.mark.anyio]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
STRICT = ToolDefinition(name="get_weather", input_schema=SCHEMA, strict=True)
LOOSE = ToolDefinition(name="lookup", input_schema=SCHEMA)
OFF = ToolDefinition(name="off", input_schema=SCHEMA, strict=False)
OPEN_ENDED = ToolDefinition(
    name="tag",
    input_schema={"type": "object", "additionalProperties": {"type": "string"}},
    strict=True,
)


def _body(*tools: ToolDefinition) -> tuple[dict[str, Any], Any]:
    call = recording_call("openai_responses", "openai_responses:gpt-5")
    request = CanonicalRequest(
        model="openai_responses:gpt-5",
        messages=[Message.user("Weather?")],
        tools=list(tools),
        max_output_tokens=64,
    )
    return OpenAIResponsesCodec().encode(request, call), call


def test_the_codec_sends_strict_only_for_a_tool_that_asks() -> None:
    body, _ = _body(OFF, STRICT, LOOSE)
    assert [(t["name"], t["strict"]) for t in body["tools"]] == [
        ("off", False),
        ("get_weather", True),
        ("lookup", False),
    ]


async def test_the_stage_makes_a_strict_tools_schema_strict_and_the_emulator_takes_it() -> None:
    body, call = _body(STRICT, LOOSE)
    [sent], _ = await drive(StrictSchema(), WireRequest(url="u", body=body), call)
    weather, lookup = sent.body["tools"]
    assert weather == {
        "type": "function",
        "name": "get_weather",
        "parameters": to_strict_schema(SCHEMA),
        "strict": True,
    }
    assert strict_schema_problem(weather["parameters"]) is None
    assert lookup == body["tools"][1]  # not asked for: as the codec wrote it
    assert call.dropped_types == []


async def test_a_schema_with_no_strict_form_goes_not_strict_with_the_warn() -> None:
    body, call = _body(OPEN_ENDED)
    [sent], _ = await drive(StrictSchema(), WireRequest(url="u", body=body), call)
    assert sent.body["tools"][0]["strict"] is False
    assert sent.body["tools"][0]["parameters"] == OPEN_ENDED.input_schema
    assert call.dropped_types == ["tool.strict"]


async def test_the_nulls_strict_mode_sends_for_optional_keys_are_taken_out() -> None:
    body, call = _body(STRICT)
    said = {"city": "Oslo", "days": None}
    block = ToolUseBlock(id="call_1", name="get_weather", input=said)
    events = [
        ToolUseEnd(0, "call_1", "get_weather", said),
        MessageComplete([block], StopReason(kind=StopKind.TOOL_USE), TokenUsage()),
    ]
    _, out = await drive(StrictSchema(), WireRequest(url="u", body=body), call, events)
    assert out[0].final_input == {"city": "Oslo"}
    assert out[1].final_content[0].input == {"city": "Oslo"}


@pytest.mark.parametrize("stack", ["openai_responses", "azure_responses"])
async def test_a_strict_tool_through_the_stack_is_sent_strict_and_the_call_answers(
    stack: str,
) -> None:
    request = platforms.request(stack, tools=[STRICT])
    with Emulator() as emulator:
        async with platforms.adapter(stack, emulator) as adapter:
            response = await adapter.complete(request)
        [sent] = emulator.requests[-1].json()["tools"]
    assert sent["strict"] is True and sent["parameters"] == to_strict_schema(SCHEMA)
    assert response.stop_reason.kind == "tool_use"
    assert response.warnings == []
