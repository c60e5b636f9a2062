"""The offline estimate counts a tool whose input schema breaks JSON Schema's shapes
(``properties`` a list, ``required`` a number, ``$defs`` a list) as well as it can: an
estimate, never a bare AttributeError or TypeError before the provider has said no."""

from __future__ import annotations

from typing import Any

import pytest

from metis.catalog.estimate import TokenProfile, estimate_request_tokens
from metis.model import CanonicalRequest, Message, ToolDefinition

ODD = [
    {"type": "object", "properties": [1, 2]},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": 5},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": [{"a": 1}]},
    {"type": "object", "$defs": [1], "properties": {"x": {"$ref": "#/$defs/0"}}},
    {"type": "object", "properties": {"x": {"type": "object", "properties": "y"}}},
]


@pytest.mark.parametrize("rendering", ["typescript", "json"])
@pytest.mark.parametrize("schema", ODD)
def test_an_odd_tool_schema_is_estimated(schema: dict[str, Any], rendering: str) -> None:
    tool = ToolDefinition(name="t", description="d", input_schema=schema)
    request = CanonicalRequest(
        model="gpt-4o", messages=[Message.user("hi")], tools=[tool], max_output_tokens=8
    )
    profile = TokenProfile(tool_rendering=rendering)  # type: ignore[arg-type]
    assert estimate_request_tokens(request, profile) > 0
