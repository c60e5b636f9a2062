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
from metis.wire.closed_schema import NUMERIC_LIMITS

_NESTED = (
    "items",
    "not",
    "anyOf",
    "allOf",
    "oneOf",
    "prefixItems",
    "properties",
    "$defs",
    "definitions",
)


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
    for key in _NESTED:
        sub = schema.get(key)
        if key in ("properties", "$defs", "definitions") and isinstance(sub, dict):
            sub = list(sub.values())
        if (found := open_object(sub, f"{path}/{key}")) is not None:
            return found
    return None


MAX_STRICT_TOOLS, MAX_OPTIONAL, MAX_UNIONS = 20, 24, 16
"""Anthropic's limits over all of a request's strict schemas (0xPlaygrounds/rig's
strict_schema_limits cassettes: 21 strict tools, 25 optional parameters and 17 with a union
refused; 20, and 24 and 16 across tools, taken)."""


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
    strict = [("output_config.format.schema", fmt)] if isinstance(fmt, dict) else []
    if isinstance(body.get("output_format"), dict):
        strict.append(("output_format.schema", body["output_format"]))
    tools = 0
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or tool.get("strict") is not True:
            continue
        if (where := open_object(tool.get("input_schema"))) is not None:
            raise Refused(
                f"tools.{i}.custom.input_schema: For 'object' type, 'additionalProperties' "
                f"must be explicitly set to false (at {where})"
            )
        strict.append((f"tools.{i}.custom", {"schema": tool.get("input_schema")}))
        tools += 1
    _check_compiled(strict, tools)


def _check_compiled(strict: list[tuple[str, dict[str, Any]]], tools: int) -> None:
    """What Anthropic's grammar compiler refuses of the strict schemas: more than 20 strict
    tools, a recursive definition, a property that is a bare ``true``, a numeric constraint,
    and more optional or union-typed parameters in all than it compiles."""
    if tools > MAX_STRICT_TOOLS:
        raise Refused(
            f"Too many strict tools ({tools}). The maximum number of strict tools supported is "
            f"{MAX_STRICT_TOOLS}. Try reducing the number of tools marked as strict."
        )
    optional = unions = 0
    for at, holder in strict:
        schema = holder.get("schema")
        if isinstance(schema, dict) and (cycle := _cycle(schema)) is not None:
            raise Refused(
                f"{at}: Invalid schema: Circular reference detected in schema definitions: "
                f"{' -> '.join(cycle)}. Self-referencing or mutually-referencing definitions "
                "are not supported."
            )
        counts = [0, 0]
        if (problem := _unsupported(schema, counts)) is not None:
            raise Refused(f"{at}: {problem}")
        optional, unions = optional + counts[0], unions + counts[1]
    if optional > MAX_OPTIONAL:
        raise Refused(
            f"Schemas contains too many optional parameters ({optional}), which would make "
            "grammar compilation inefficient. Reduce the number of optional parameters in your "
            f"tool schemas (limit: {MAX_OPTIONAL})."
        )
    if unions > MAX_UNIONS:
        raise Refused(
            f"Schemas contains too many parameters with union types ({unions} parameters with "
            "type arrays or anyOf). This causes exponential compilation cost. Reduce the number "
            f"of nullable or union-typed parameters (limit: {MAX_UNIONS} parameters with unions)."
        )


def _unsupported(schema: Any, counts: list[int]) -> str | None:
    """The first thing of ``schema`` the compiler does not take, in Anthropic's words; counts
    its optional (``counts[0]``) and union-typed (``counts[1]``) properties on the way."""
    if isinstance(schema, list):
        return next((p for s in schema if (p := _unsupported(s, counts)) is not None), None)
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind in ("integer", "number"):
        taken = next((k for k in NUMERIC_LIMITS if k in schema), None)
        if taken is not None:
            return f"For '{kind}' type, property '{taken}' is not supported"
    props = schema.get("properties")
    if isinstance(props, dict):
        if any(isinstance(sub, bool) for sub in props.values()):
            return "For 'object' type, property 'properties' is not supported"
        listed = schema.get("required")
        required = set(listed) if isinstance(listed, list) else set()
        counts[0] += len([name for name in props if name not in required])
        counts[1] += sum(1 for sub in props.values() if _is_union(sub))
    for key in _NESTED:
        sub = schema.get(key)
        if key in ("properties", "$defs", "definitions") and isinstance(sub, dict):
            sub = list(sub.values())
        if (problem := _unsupported(sub, counts)) is not None:
            return problem
    return None


def _is_union(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    return (isinstance(kind, list) and len(kind) > 1) or "anyOf" in schema


def _cycle(schema: dict[str, Any]) -> list[str] | None:
    """The names along a definition that refers back to itself (``Node -> Node``), or None."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    refers = {name: sorted(_refs(sub) & set(defs)) for name, sub in defs.items()}

    def walk(path: list[str]) -> list[str] | None:
        for step in refers[path[-1]]:
            if step == path[0]:
                return [*path, step]
            if step not in path and (found := walk([*path, step])) is not None:
                return found
        return None

    return next((found for start in defs if (found := walk([start])) is not None), None)


def _refs(schema: Any) -> set[str]:
    if isinstance(schema, list):
        return set().union(*(_refs(s) for s in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    ref = schema.get("$ref")
    found = {ref.rsplit("/", 1)[-1]} if isinstance(ref, str) and ref.startswith("#/") else set()
    return found.union(*(_refs(v) for v in schema.values()))


def check_converse(body: dict[str, Any], call: Any) -> None:
    tools = (body.get("toolConfig") or {}).get("tools") or []
    for i, tool in enumerate(tools):
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if isinstance(spec, dict) and spec.get("strict") is True:
            schema = (spec.get("inputSchema") or {}).get("json")
            if (where := open_object(schema)) is not None:
                raise Refused(
                    f"toolConfig.tools.{i}.toolSpec.inputSchema: a strict tool's objects must "
                    f"set additionalProperties to false (at {where})"
                )
    schema = converse_output_schema(body)
    if schema is not None and (where := open_object(schema)) is not None:
        raise Refused(
            "outputConfig.textFormat.structure.jsonSchema.schema: an object must set "
            f"additionalProperties to false (at {where})"
        )


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
