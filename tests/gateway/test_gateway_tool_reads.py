"""A client's tools as the gateway reads them: one canonical tool for each content, kept
across requests (metis/gateway/inbound.py ``tool_definition``), never one tool for another."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.gateway import inbound
from metis.gateway.anthropic_api import read_messages
from metis.gateway.chat_api import read_chat
from metis.model.request import ToolDefinition

pytestmark = pytest.mark.backend_independent


def _messages_tools(*tools: dict[str, Any]) -> list[ToolDefinition]:
    body = {
        "model": "m",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": list(tools),
    }
    return read_messages(body).fields["tools"]  # type: ignore[no-any-return]


def _tool(schema: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "get", "description": "Get it.", "input_schema": schema, **more}


def test_the_same_tool_sent_again_is_read_once_into_the_very_same_tool() -> None:
    """Every request that sends it is given the same tool, so what the steps derive from its
    schema is made once (an application's stage that edits one in place is given its own
    copy: tests/pipeline/test_own_schema_stage.py)."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    first = _messages_tools(_tool(schema))[0]
    again = _messages_tools(_tool({"type": "object", "properties": {"city": {"type": "string"}}}))
    assert again[0] is first
    assert first == ToolDefinition(name="get", description="Get it.", input_schema=schema)
    assert first.input_schema is not schema  # not the client's body's dict
    assert list(inbound._TOOLS.values()).count(first) == 1  # kept once, by its content


@pytest.mark.parametrize(
    "changed",
    [
        {"input_schema": {"type": "object", "properties": {"n": {"maximum": 1.0}}}},
        {"input_schema": {"type": "object", "properties": {"n": {"maximum": True}}}},
        {"input_schema": {"type": "object", "properties": {"m": {"maximum": 1}}}},
        {"name": "other"},
        {"description": "Get something else."},
        {"strict": True},
    ],
)
def test_a_tool_that_differs_in_anything_is_read_as_itself(changed: dict[str, Any]) -> None:
    base = _tool({"type": "object", "properties": {"n": {"maximum": 1}}})
    original = _messages_tools(base)[0]
    read = _messages_tools({**base, **changed})[0]
    assert read != original or type(read.input_schema["properties"]["n"]["maximum"]) is not int
    expected = {**base, **changed}
    assert read.name == expected["name"] and read.description == expected["description"]
    assert read.strict == expected.get("strict")
    assert read.input_schema == expected["input_schema"]
    for value, kept in zip(
        expected["input_schema"]["properties"].values(),
        read.input_schema["properties"].values(),
        strict=True,
    ):
        assert type(value["maximum"]) is type(kept["maximum"])  # 1, 1.0, True apart
    again = _messages_tools(base)[0]  # the first is still read as before
    assert again == original and type(again.input_schema["properties"]["n"]["maximum"]) is int


def test_each_api_reads_a_kept_tool_with_its_own_checks() -> None:
    schema = {"type": "object", "properties": {}}
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "get", "parameters": schema}}],
    }
    assert read_chat(chat).fields["tools"][0].input_schema == schema
    with pytest.raises(InvalidRequestError, match="strict"):
        _messages_tools(_tool(schema, strict="yes"))
    with pytest.raises(InvalidRequestError, match="input schema"):
        _messages_tools(_tool(["not", "an", "object"]))  # type: ignore[arg-type]
