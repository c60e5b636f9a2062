"""A tool whose input schema is odd (recursive, dangling or remote ``$ref``, keywords of the
wrong type, nested past any limit) goes through every family's request path: sent (and
answered), or refused with a classified error; never a bare exception from metis."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import AdapterError
from metis.model import CanonicalRequest, Message, ToolDefinition
from metis.testing.emulator import Emulator

from ..stack_table import MODELS, adapter


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    inner = schema
    for _ in range(levels):
        inner["properties"]["x"] = {"type": "object", "properties": {}}
        inner = inner["properties"]["x"]
    return schema


ODD: dict[str, dict[str, Any]] = {
    "self-reference": {"type": "object", "properties": {"child": {"$ref": "#"}}},
    "cycle": {
        "type": "object",
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        },
        "properties": {"a": {"$ref": "#/$defs/A"}},
    },
    "dangling": {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}},
    "properties-list": {"type": "object", "properties": [1, 2]},
    "enum-string": {"type": "object", "properties": {"x": {"enum": "abc"}}},
    "required-number": {"type": "object", "properties": {"x": {"type": "string"}}, "required": 5},
    "defs-list": {"type": "object", "$defs": [1], "properties": {"x": {"$ref": "#/$defs/0"}}},
    "deep": _deep(200),
}


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["anthropic", "openai", "openai_responses", "gemini", "bedrock"])
@pytest.mark.parametrize("strict", [None, True])
async def test_an_odd_tool_schema_is_sent_or_refused_classified(
    stack: str, strict: bool | None
) -> None:
    emulator = Emulator()
    built = adapter(stack, emulator, http_client=emulator.client(), max_retries=0)
    try:
        for name, schema in ODD.items():
            tool = ToolDefinition(name="t", description="d", input_schema=schema, strict=strict)
            request = CanonicalRequest(
                model=MODELS[stack].split(":", 1)[1],
                messages=[Message.user("hi")],
                tools=[tool],
                max_output_tokens=16,
            )
            try:
                await built.complete(request)
            except AdapterError:
                pass  # refused, classified
            except Exception as exc:
                pytest.fail(f"{name}: {type(exc).__name__}: {exc}")
    finally:
        await built.aclose()
