"""Bedrock Converse to a Claude model refuses the strict schemas Anthropic's grammar compiler
refuses (metis/wire/anthropic/strict_limits.py), in Claude's words after Bedrock's "The model
returned the following errors: " and at the places of the Anthropic request Bedrock makes of
it (BerriAI/litellm#39115: ``tools.1.custom: For 'array' type, property 'maxItems' is not
supported``; pydantic/pydantic-ai#5579: "Too many strict tools (73). The maximum number of
strict tools supported is 20."; strands-agents/harness-sdk#2664: over 24 optional parameters
across the tools refused). Another model's strict schemas are no Claude's to compile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator

CLAUDE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
SAID = [{"role": "user", "content": [{"text": "Name a large city in Peru."}]}]
CACHE_POINT = {"cachePoint": {"type": "default"}}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with Emulator() as emulator, httpx.Client(base_url=emulator.url, timeout=10) as client:
        yield client


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}  # fmt: skip


def _tool(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    spec = {"name": name, "strict": True, "inputSchema": {"json": _schema(props, required)}}
    return {"toolSpec": spec}


def _converse(http: httpx.Client, model: str, **fields: Any) -> httpx.Response:
    body = {"messages": SAID, **fields}
    headers = {"authorization": "Bearer bedrock-key"}
    return http.post(f"/model/{model}/converse", json=body, headers=headers)


OPTIONAL = {f"o{i}": {"type": "string"} for i in range(13)}
REFUSED = {
    "21 strict tools": (
        [_tool(f"t{i}", {}, []) for i in range(21)],
        None,
        "Too many strict tools (21). The maximum number of strict tools supported is 20.",
    ),
    "25 optional parameters": (
        [_tool("a", OPTIONAL, []), _tool("b", dict(list(OPTIONAL.items())[:12]), [])],
        None,
        "Schemas contains too many optional parameters (25)",
    ),
    "a minimum, after a cache point": (
        [_tool("a", {}, []), CACHE_POINT, _tool("b", {"n": {"type": "integer", "minimum": 1}},
                                                ["n"])],
        None,
        "tools.1.custom: For 'integer' type, property 'minimum' is not supported",
    ),
    "a minimum in the output schema": (
        None,
        _schema({"age": {"type": "number", "maximum": 150}}, ["age"]),
        "output_config.format.schema: For 'number' type, property 'maximum' is not supported",
    ),
    "a maxItems, in the second tool (litellm#39115)": (
        [_tool("a", {}, []), _tool("b", {"tags": {"type": "array", "maxItems": 4}}, ["tags"])],
        None,
        "tools.1.custom: For 'array' type, property 'maxItems' is not supported",
    ),
    "a oneOf (harness-sdk#2664)": (
        [_tool("a", {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}, ["v"])],
        None,
        "tools.0.custom: Schema type 'oneOf' is not supported",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_claude_on_converse_refuses_what_its_schema_compiler_refuses(
    http: httpx.Client, name: str
) -> None:
    tools, output, said = REFUSED[name]
    fields: dict[str, Any] = {}
    if tools:
        fields["toolConfig"] = {"tools": tools}
    if output:
        structure = {"jsonSchema": {"schema": json.dumps(output), "name": "person"}}
        fields["outputConfig"] = {"textFormat": {"type": "json_schema", "structure": structure}}
    reply = _converse(http, CLAUDE, **fields)
    assert reply.status_code == 400, reply.text[:300]
    assert reply.headers["x-amzn-errortype"].startswith("ValidationException")
    message = reply.json()["message"]
    assert message.startswith("The model returned the following errors: ")
    assert said in message


def test_claude_on_converse_takes_strict_schemas_at_the_limits(http: httpx.Client) -> None:
    optional = {f"o{i}": {"type": "string"} for i in range(12)}
    for tools in (
        [_tool(f"t{i}", {}, []) for i in range(20)],
        [_tool("a", optional, []), CACHE_POINT, _tool("b", optional, [])],
    ):
        reply = _converse(http, CLAUDE, toolConfig={"tools": tools})
        assert reply.status_code == 200, reply.text[:300]


def test_another_model_s_strict_schemas_are_not_claude_s_to_compile(http: httpx.Client) -> None:
    tools = [_tool(f"t{i}", {}, []) for i in range(21)]
    reply = _converse(http, "qwen.qwen3-32b-v1:0", toolConfig={"tools": tools})
    assert reply.status_code == 200, reply.text[:300]
