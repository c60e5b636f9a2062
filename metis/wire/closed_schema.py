"""Structured outputs on Anthropic Messages and Bedrock Converse: a schema with every object
closed.

Both APIs take ``strict: true`` on a tool (Anthropic's ``tools[].strict``, Converse's
``toolSpec.strict``), and Anthropic an output schema (``output_config.format``), and then want
``additionalProperties: false`` on every object of the schema; optional properties stay
optional (unlike OpenAI's strict mode, :mod:`metis.wire.strict_schema`).
:func:`closed_schema_or_reason` adds the ``false`` where a schema leaves it out, and answers
``None`` with the reason where the schema lets an object take keys it does not name, which
constrained decoding there cannot express. The limits Anthropic's grammar does not take (a
number's ``minimum``, ``maximum``, ..., a string's ``minLength`` and ``maxLength``, an array's
``maxItems`` and a ``minItems`` other than 0 or 1: :func:`refused_limits`; of each type a
``type`` list names) go as words of its description, and a ``oneOf`` goes as the ``anyOf`` the
grammar takes, as Anthropic's own SDK sends them (anthropic-sdk-python's ``transform_schema``).
"""

from __future__ import annotations

import json
from typing import Any

from metis.model.request import ToolDefinition
from metis.model.schema_forms import form
from metis.model.tool_fit import STRICT_FLAG
from metis.wire.codec import EncodeContext
from metis.wire.encoded_messages import sent_schema
from metis.wire.strict_schema import Schema

MAX_DEPTH = 64
"""Deeper than this the schema is not made strict (no model's tool schema is so deep)."""
NUMERIC_LIMITS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
LIMITS = {
    "integer": NUMERIC_LIMITS,
    "number": NUMERIC_LIMITS,
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
}
"""The limits of each type Anthropic's grammar refuses (the "JSON Schema limitations" of its
structured-outputs documentation, and its 400s: "For 'integer' type, property 'minimum' is not
supported", vkryukov/req_llm's object_basic fixture; "For 'string' type, property 'maxLength'
is not supported", laravel/ai#715; "For 'array' type, property 'maxItems' is not supported",
BerriAI/litellm#39115; "For 'array' type, 'minItems' values other than 0 or 1 are not
supported", ghostlobster/memorize-everything#93)."""

_ONE = ("items", "not", "additionalItems", "contains")
_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_MAPS = ("properties", "$defs", "definitions")


class _Open(Exception):
    """The schema cannot be closed without changing what it takes; the message says why."""


def strict_input_schema(tool: ToolDefinition, call: EncodeContext) -> tuple[Schema, bool]:
    """The schema to send for ``tool`` and whether it goes strict: closed where the tool asks
    for strict and its schema can be closed (closed once per schema object, its closed form
    shared: metis/model/schema_forms.py); as written, the flag reported dropped, where it
    cannot."""
    if not tool.strict:
        return sent_schema(tool.input_schema), False
    closed, reason = form(tool.input_schema, "closed_schema", closed_schema_or_reason)
    if closed is None:
        call.warn_dropped(STRICT_FLAG, f"tool {tool.name!r} is sent without strict: {reason}")
        return sent_schema(tool.input_schema), False
    return sent_schema(closed), True


def closed_schema_or_reason(schema: Any) -> tuple[Schema | None, str | None]:
    """``schema`` with ``additionalProperties: false`` on each object that has none (a new
    schema: the caller's is not changed), or ``None`` and the reason when an object already
    takes other keys."""
    if not isinstance(schema, dict):
        return None, "the schema is not a JSON object"
    try:
        return _close(schema, "", 0), None
    except _Open as exc:
        return None, str(exc)


def _close(schema: Schema, path: str, depth: int) -> Schema:
    if depth > MAX_DEPTH:
        raise _Open(f"{path or '/'}: nested more than {MAX_DEPTH} deep")
    out = dict(schema)
    if refused := refused_limits(schema):
        _limits_as_words(out, refused)
    if isinstance(schema.get("oneOf"), list):
        if "anyOf" in schema:
            raise _Open(f"{path or '/'}: takes oneOf beside anyOf (the grammar takes no oneOf)")
        out["anyOf"] = out.pop("oneOf")
    if _is_object(schema):
        extra = schema.get("additionalProperties", False)
        if extra is not False:
            raise _Open(f"{path or '/'}: takes keys it does not name (additionalProperties)")
        if "patternProperties" in schema:
            raise _Open(f"{path or '/'}: takes keys by pattern (patternProperties)")
        out["additionalProperties"] = False
    for key in _ONE:
        if isinstance(schema.get(key), dict):
            out[key] = _close(schema[key], f"{path}/{key}", depth + 1)
    for key in _LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_sub(sub, f"{path}/{key}/{i}", depth) for i, sub in enumerate(out[key])]
    for key in _MAPS:
        if isinstance(schema.get(key), dict):
            items = schema[key].items()
            out[key] = {name: _sub(sub, f"{path}/{key}/{name}", depth) for name, sub in items}
    return out


def refused_limits(schema: Schema) -> list[str]:
    """The keys of ``schema``'s limits Anthropic's grammar refuses (:data:`LIMITS`), in the
    order the schema gives them: a ``minItems`` of 0 or 1 it takes. A ``type`` that lists
    several (``["integer", "null"]``) refuses the limits of each type it lists."""
    named = limited_types(schema)
    return [
        key
        for key in schema
        if any(key in LIMITS[kind] for kind in named)
        and not (key == "minItems" and schema[key] in (0, 1))
    ]


def limited_types(schema: Schema) -> list[str]:
    """The types ``schema`` names (its ``type``, one or a list) that have limits in
    :data:`LIMITS`, in its order."""
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    return [k for k in kinds if isinstance(k, str) and k in LIMITS]


def _limits_as_words(out: Schema, keys: list[str]) -> None:
    """The limits ``keys`` of a schema, said in its description instead."""
    words = ", ".join(f"{key}: {json.dumps(out.pop(key))}" for key in keys)
    described = out.get("description")
    out["description"] = f"{described} ({words})" if isinstance(described, str) else words


def _sub(schema: Any, path: str, depth: int) -> Any:
    return _close(schema, path, depth + 1) if isinstance(schema, dict) else schema


def _is_object(schema: Schema) -> bool:
    kind = schema.get("type")
    return (
        kind == "object"
        or (isinstance(kind, list) and "object" in kind)
        or (kind is None and "properties" in schema)
    )
