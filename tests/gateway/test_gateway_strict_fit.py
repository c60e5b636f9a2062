"""Strict schemas Claude's grammar compiler refuses (metis/wire/anthropic/strict_limits.py,
which the emulator refuses by), from clients of any API through the gateway to a Claude model:
the output schema that breaks a rule is left out and a strict tool that does goes without
``strict``, each named in ``x-metis-dropped``; the request is answered, never refused. What
Anthropic's own SDK rewrites (a limit as words, a ``oneOf`` as ``anyOf``) goes strict,
rewritten."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import metis
from metis.errors import InvalidRequestError
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_recorded_requests import HEADERS, asked

pytestmark = pytest.mark.anyio
SAID = [{"role": "user", "content": "Turn <ul><li>a</li></ul> into a tree."}]
NODE = {
    "type": "object",
    "properties": {
        "tag": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
    },
    "required": ["tag", "children"],
    "additionalProperties": False,
}
RECURSIVE = {**NODE, "$defs": {"Node": NODE}}
"""A node of a tree whose children are nodes (vicentereig/dspy.rb's html_to_markdown
response_format, a recursive json_schema OpenAI answered)."""


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    listed = list(properties) if required is None else required
    return {"type": "object", "properties": properties, "required": listed}


BROKEN = {
    "recursive": RECURSIVE,
    "true property": obj({"anything": True}),
    "open map": obj({"labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
    "optional": obj({f"p{i}": {"type": "string"} for i in range(25)}, required=[]),
    "unions": obj({f"u{i}": {"type": ["string", "null"]} for i in range(17)}),
}
"""One schema per rule of Anthropic's compiler a schema can break by itself (a number's limits
go as words instead: test_a_numbers_limits_reach_claude_as_words)."""


def tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "strict": True, "parameters": schema}}


async def chat(emulator: Emulator, model: str, **extra: Any) -> httpx.Response:
    body = {"model": model, "messages": SAID, **extra}
    return await asked(emulator, "/v1/chat/completions", body)


@pytest.mark.parametrize("kind", list(BROKEN))
async def test_an_output_schema_claude_cannot_compile_is_left_out_and_named(kind: str) -> None:
    emulator = Emulator()
    fmt = {"type": "json_schema", "json_schema": {"name": "tree", "schema": BROKEN[kind]}}
    for model in ("sonnet", "haiku"):
        reply = await chat(emulator, model, response_format=fmt)
        assert reply.status_code == 200, reply.text
        assert "output schema (Claude's structured output" in reply.headers["x-metis-dropped"]
    assert "output_config" not in emulator.bodies("anthropic")[-1]
    assert "outputConfig" not in emulator.bodies("bedrock")[-1]
    reply = await chat(emulator, "gpt", response_format=fmt)  # OpenAI takes it as it is
    assert reply.status_code == 200, reply.text
    assert emulator.bodies("openai")[-1]["response_format"] == fmt


@pytest.mark.parametrize("kind", list(BROKEN))
async def test_a_strict_tool_claude_cannot_compile_goes_without_strict(kind: str) -> None:
    emulator = Emulator()
    fine = tool("fine", obj({"tag": {"type": "string"}}))
    reply = await chat(emulator, "sonnet", tools=[tool("tree", BROKEN[kind]), fine])
    assert reply.status_code == 200, reply.text
    assert "'tree'" in reply.headers["x-metis-dropped"]
    assert "'fine'" not in reply.headers["x-metis-dropped"]
    sent = emulator.bodies("anthropic")[-1]["tools"]
    assert [t.get("strict") for t in sent] == [None, True]


async def test_the_strict_tools_past_twenty_go_without_strict() -> None:
    emulator = Emulator()
    tools = [tool(f"t{i}", obj({"x": {"type": "string"}})) for i in range(22)]
    reply = await chat(emulator, "sonnet", tools=tools)
    assert reply.status_code == 200, reply.text
    sent = emulator.bodies("anthropic")[-1]["tools"]
    assert [t.get("strict") for t in sent] == [True] * 20 + [None] * 2
    dropped = reply.headers["x-metis-dropped"]
    assert "'t20'" in dropped and "'t21'" in dropped and "'t19'" not in dropped


async def test_the_limits_count_over_all_strict_schemas() -> None:
    """Twelve optional parameters each: the output schema and the first tool fit in 24, the
    second tool does not and goes without strict."""
    emulator = Emulator()
    twelve = obj({f"p{i}": {"type": "string"} for i in range(12)}, required=[])
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": twelve}}
    tools = [tool("first", twelve), tool("second", twelve)]
    reply = await chat(emulator, "sonnet", response_format=fmt, tools=tools)
    assert reply.status_code == 200, reply.text
    sent = emulator.bodies("anthropic")[-1]
    assert "format" in sent["output_config"]
    assert [t.get("strict") for t in sent["tools"]] == [True, None]
    assert "optional parameters" in reply.headers["x-metis-dropped"]


async def test_the_emulator_refuses_what_the_gateway_leaves_out() -> None:
    """The rules are Anthropic's: sent as the client wrote it, each is a 400 (what the
    gateway sends rewritten too)."""
    emulator = Emulator()
    async with emulator.client() as direct:
        for kind, schema in {**BROKEN, "rewritten": REWRITTEN}.items():
            closed = {**schema, "additionalProperties": False}
            strict = {"name": "tree", "strict": True, "input_schema": closed}
            body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": SAID}
            reply = await direct.post(
                "http://emulator/v1/messages", json={**body, "tools": [strict]}, headers=HEADERS
            )
            assert reply.status_code == 400, kind


async def test_the_librarys_own_caller_gets_claudes_refusal(
    emulator_server: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the gateway leaves the schema out: metis never changes its own caller's request
    (docs/contract.md), so the call is refused as Anthropic refuses it."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with pytest.raises(InvalidRequestError, match="Circular reference"):
        await metis.acomplete("anthropic:claude-sonnet-4-5", "A tree?", output_schema=RECURSIVE)


async def test_a_strict_tool_sent_without_strict_anyway_is_not_counted() -> None:
    """A strict tool whose schema takes keys it does not name goes without strict (the
    library's rule), so it does not count among the twenty."""
    emulator = Emulator()
    tools = [tool("open", BROKEN["open map"])]
    tools += [tool(f"t{i}", obj({"x": {"type": "string"}})) for i in range(20)]
    reply = await chat(emulator, "sonnet", tools=tools)
    assert reply.status_code == 200, reply.text
    sent = emulator.bodies("anthropic")[-1]["tools"]
    assert [t.get("strict") for t in sent] == [None] + [True] * 20
    assert "over 20" not in reply.headers["x-metis-dropped"]


REWRITTEN = obj(
    {
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "note": {"type": "string", "maxLength": 800, "description": "A note"},
        "value": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    }
)
"""What Anthropic's grammar refuses and its SDK rewrites (an array's maxItems, a string's
maxLength as words; a oneOf as anyOf: anthropic-sdk-python's transform_schema)."""


async def test_a_strict_tool_claudes_sdk_would_rewrite_goes_strict_rewritten() -> None:
    """An OpenAI client's strict tool with a maxItems (experientiallabs/experiential#804: 18
    requests in 6 hours refused, tools.0.custom: For 'array' type, property 'maxItems' is not
    supported), a maxLength and a oneOf reaches Claude strict, as Anthropic's SDK sends it."""
    emulator = Emulator()
    for model, platform in (("sonnet", "anthropic"), ("haiku", "bedrock")):
        reply = await chat(emulator, model, tools=[tool("tag", REWRITTEN)])
        assert reply.status_code == 200, reply.text
        assert "x-metis-dropped" not in reply.headers
        body = emulator.bodies(platform)[-1]
        tools = body.get("tools") or body["toolConfig"]["tools"]
        [sent] = [t.get("toolSpec", t) for t in tools if "cachePoint" not in t]
        schema = sent.get("input_schema") or sent["inputSchema"]["json"]
        assert sent["strict"] is True
        assert schema["properties"] == {
            "tags": {"type": "array", "items": {"type": "string"}, "description": "maxItems: 3"},
            "note": {"type": "string", "description": "A note (maxLength: 800)"},
            "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        }


async def test_a_one_of_beside_an_any_of_goes_without_strict_and_is_named() -> None:
    emulator = Emulator()
    both = {"oneOf": [{"type": "string"}], "anyOf": [{"type": "string"}, {"type": "null"}]}
    reply = await chat(emulator, "sonnet", tools=[tool("tag", obj({"value": both}))])
    assert reply.status_code == 200, reply.text
    assert "strict" not in emulator.bodies("anthropic")[-1]["tools"][0]
    assert reply.headers["x-metis-dropped"] == (
        "tool.strict (tool 'tag' is sent without strict: /properties/value: takes oneOf beside "
        "anyOf (the grammar takes no oneOf))"
    )
