"""Structured outputs as Anthropic Messages and Bedrock Converse check them: a tool sent with
``strict: true``, Anthropic's ``output_config.format`` schema and Converse's
``outputConfig.textFormat`` schema (a JSON string there), have ``additionalProperties: false``
on every object (the structured-outputs documentation of both; optional properties may
stay optional, unlike OpenAI's strict mode,
:func:`metis.testing.emulator.formats.openai.strict_schema_problem`)."""

from __future__ import annotations

import json
from typing import Any

from metis.testing.emulator.rules import Refused
from metis.wire.anthropic.strict_limits import NESTED, compile_problem


def open_object(schema: Any, path: str = "") -> str | None:
    """The path of the first object in ``schema`` that is not closed, or None."""
    if isinstance(schema, list):
        return next((p for i, s in enumerate(schema) if (p := open_object(s, f"{path}/{i}"))), None)
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if is_object and schema.get("additionalProperties") is not False:
        return path or "/"
    for key in NESTED:
        sub = schema.get(key)
        if key in ("properties", "$defs", "definitions") and isinstance(sub, dict):
            sub = list(sub.values())
        if (found := open_object(sub, f"{path}/{key}")) is not None:
            return found
    return None


def check_anthropic(body: dict[str, Any], call: Any) -> None:
    config = body.get("output_config")
    if config is not None and not isinstance(config, dict):
        raise Refused("output_config: Input should be a valid dictionary")
    fmt = (config or {}).get("format")
    if isinstance(fmt, dict) and (where := open_object(fmt.get("schema"))) is not None:
        raise Refused(
            "output_config.format.schema: For 'object' type, 'additionalProperties' must be "
            f"explicitly set to false (at {where})"
        )
    strict = [("output_config.format.schema", fmt.get("schema"))] if isinstance(fmt, dict) else []
    if isinstance(body.get("output_format"), dict):
        strict.append(("output_format.schema", body["output_format"].get("schema")))
    tools = 0
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or tool.get("strict") is not True:
            continue
        if (where := open_object(tool.get("input_schema"))) is not None:
            raise Refused(
                f"tools.{i}.custom.input_schema: For 'object' type, 'additionalProperties' "
                f"must be explicitly set to false (at {where})"
            )
        strict.append((f"tools.{i}.custom", tool.get("input_schema")))
        tools += 1
    if (problem := compile_problem(strict, tools)) is not None:
        raise Refused(problem)


def check_converse(body: dict[str, Any], call: Any) -> None:
    """Strict schemas closed; for a Claude model, also what Anthropic's grammar compiler
    refuses of them (:func:`compile_problem`), as Bedrock answers it: Claude's own words after
    "The model returned the following errors: ", at the places of the Anthropic request
    Bedrock made (``tools.1.custom``: BerriAI/litellm#39115; "Too many strict tools (73)":
    pydantic/pydantic-ai#5579; over 24 optional parameters: strands-agents/harness-sdk#2664)."""
    tools = (body.get("toolConfig") or {}).get("tools") or []
    strict: list[tuple[str, Any]] = []
    anthropic_index = -1  # the tool's place among those Bedrock sends Claude (no cachePoint)
    for i, tool in enumerate(tools):
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        anthropic_index += isinstance(spec, dict)
        if isinstance(spec, dict) and spec.get("strict") is True:
            schema = (spec.get("inputSchema") or {}).get("json")
            if (where := open_object(schema)) is not None:
                raise Refused(
                    f"toolConfig.tools.{i}.toolSpec.inputSchema: a strict tool's objects must "
                    f"set additionalProperties to false (at {where})"
                )
            strict.append((f"tools.{anthropic_index}.custom", schema))
    schema = converse_output_schema(body)
    if schema is not None and (where := open_object(schema)) is not None:
        raise Refused(
            "outputConfig.textFormat.structure.jsonSchema.schema: an object must set "
            f"additionalProperties to false (at {where})"
        )
    if "claude" not in str(getattr(call, "model", "")):
        return
    tools_strict = len(strict)
    if schema is not None:
        strict.insert(0, ("output_config.format.schema", schema))
    if (problem := compile_problem(strict, tools_strict)) is not None:
        raise Refused(f"The model returned the following errors: {problem}")


def converse_output_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of Converse's ``outputConfig.textFormat``, or None; refused as Converse
    refuses a format that is not a JSON schema given as a string holding a JSON object."""
    config = body.get("outputConfig")
    if config is None:
        return None
    fmt = config.get("textFormat") if isinstance(config, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        raise Refused("outputConfig.textFormat.type: must be json_schema")
    definition = (fmt.get("structure") or {}).get("jsonSchema")
    text = definition.get("schema") if isinstance(definition, dict) else None
    if not isinstance(text, str):
        raise Refused("outputConfig.textFormat.structure.jsonSchema.schema: a string is required")
    try:
        schema = json.loads(text)
    except ValueError:
        schema = None
    if not isinstance(schema, dict):
        raise Refused("outputConfig.textFormat.structure.jsonSchema.schema: not a JSON schema")
    return schema
