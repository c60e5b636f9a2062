"""Tool definitions as OpenAI shows them to its models (a TypeScript-like namespace), for the
pre-flight token estimate (:mod:`metis.catalog.estimate`)."""

from __future__ import annotations

import json
from typing import Any

from metis.model.request import ToolDefinition
from metis.model.schema_forms import form

MAX_DEPTH = 8


def rendered(tool: ToolDefinition, typescript_form: bool) -> str:
    """The text of ``tool`` the estimate counts: :func:`typescript` or its compact JSON, made
    once per schema object and kept with it (:mod:`metis.model.schema_forms`: found again
    while the schema holds what it held, so a schema an application changed in place between
    calls is rendered anew), under the tool's name and description."""
    key = ("rendered", typescript_form, tool.name, tool.description)
    return form(tool.input_schema, key, lambda _: _render(tool, typescript_form))


def _render(tool: ToolDefinition, typescript_form: bool) -> str:
    if typescript_form:
        return typescript(tool)
    return _compact(
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    )


def typescript(tool: ToolDefinition) -> str:
    """A function tool as OpenAI shows it to the model: its description as a comment, then
    ``type name = (_: {...}) => any;``, or ``() => any`` when it takes no parameters."""
    lines = [f"// {tool.description}"] if tool.description else []
    schema = tool.input_schema
    defs = _mapping(schema.get("$defs") or schema.get("definitions"))
    if _mapping(schema.get("properties")):
        lines.append(f"type {tool.name} = (_: {{")
        lines.extend(_ts_properties(schema, defs, 0))
        lines.append("}) => any;")
    else:
        lines.append(f"type {tool.name} = () => any;")
    return "\n".join(lines) + "\n\n"


def _ts_properties(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> list[str]:
    lines: list[str] = []
    required = schema.get("required")
    names = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    pad = "  " * depth
    for name, prop in _mapping(schema.get("properties")).items():
        prop = prop if isinstance(prop, dict) else {}
        description = prop.get("description")
        if isinstance(description, str) and description:
            lines.append(f"{pad}// {description}")
        mark = "" if name in names else "?"
        lines.append(f"{pad}{name}{mark}: {_ts_type(prop, defs, depth)},")
    return lines


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` where a schema keyword holds a mapping as it should; else an empty one (the
    estimate counts what it can; the provider refuses the schema)."""
    return value if isinstance(value, dict) else {}


def _ts_type(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> str:
    if depth >= MAX_DEPTH:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        return _ts_type(target, defs, depth + 1) if isinstance(target, dict) else "any"
    if isinstance(schema.get("enum"), list):
        return " | ".join(_compact(value) for value in schema["enum"])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return " | ".join(_ts_type(o, defs, depth + 1) for o in options if isinstance(o, dict))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}, defs, depth + 1) for k in kind)
    if kind == "object":
        if not _mapping(schema.get("properties")):
            return "object"
        inner = _ts_properties(schema, defs, depth + 1)
        return "{\n" + "\n".join(inner) + "\n" + "  " * depth + "}"
    if kind == "array":
        items = schema.get("items")
        return (_ts_type(items, defs, depth + 1) if isinstance(items, dict) else "any") + "[]"
    if kind == "integer":
        return "number"
    return kind if isinstance(kind, str) else "any"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
