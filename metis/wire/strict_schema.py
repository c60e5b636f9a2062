"""OpenAI strict mode's subset of JSON Schema: :func:`to_strict_schema` rewrites a schema into
it, or answers ``None`` when it cannot without changing what the schema means.

Strict mode constrains decoding to a subset of JSON Schema: every object closed
(``additionalProperties: false``), every property required, optional ones expressed as
nullable. A free-form dict, ``oneOf``, ``patternProperties``, a length constraint strict mode
does not take... cannot be expressed, and the answer is ``None`` with the reason.
"""

from __future__ import annotations

import copy
import re
from typing import Any

Schema = dict[str, Any]

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def schema_name(title: Any) -> str:
    """The name an output schema goes by (``[A-Za-z0-9_-]{1,64}``): its title, ``output``
    where it has none."""
    name = _NAME_UNSAFE.sub("_", title)[:64] if isinstance(title, str) else ""
    return name if any(c.isalnum() for c in name) else "output"


_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})

# Keywords strict mode takes as they are.
_KEPT = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "allOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)

# Annotations: they constrain nothing, so dropping them keeps the schema's meaning. Strict
# mode rejects some of them ("'default' is not permitted").
_DROPPED = frozenset(
    {
        "default",
        "examples",
        "$comment",
        "$schema",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentEncoding",
        "contentMediaType",
    }
)

# Subschemas, rebuilt by the conversion itself.
_REBUILT = frozenset({"properties", "items", "anyOf", "allOf", "$defs", "definitions"})

_ANNOTATIONS = ("title", "description")
_NULL: Schema = {"type": "null"}


class _NotStrict(Exception):
    """The schema cannot be made strict without changing its meaning; the message says why."""


def to_strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` in OpenAI's strict subset, or ``None`` if that would change its meaning.

    The input is never modified; the answer shares no mutable part with it.
    """
    converted, _ = strict_schema_or_reason(schema)
    return converted


def strict_schema_or_reason(schema: Any) -> tuple[Schema | None, str | None]:
    """Like :func:`to_strict_schema`, with the reason when the answer is ``None``."""
    try:
        return _convert_root(schema), None
    except _NotStrict as exc:
        return None, str(exc)


def _convert_root(schema: Any) -> Schema:
    if not isinstance(schema, dict):
        raise _NotStrict("the schema is not a JSON object")
    if not is_object_schema(schema):
        raise _NotStrict("the root schema is not an object schema")
    return _convert(schema, "")


def _convert(schema: Any, path: str) -> Schema:
    """One schema (not made nullable) in the strict subset."""
    where = path.rstrip(".") or "the root"
    out = _kept_keywords(schema, path, where)

    for key in ("$defs", "definitions"):
        if key in out:
            defs = out[key]
            if not isinstance(defs, dict):
                raise _NotStrict(f"{where}: {key} is not an object")
            out[key] = {name: _convert(d, f"{path}{key}.{name}.") for name, d in defs.items()}

    if "enum" in out and not isinstance(out["enum"], list):
        raise _NotStrict(f"{where}: enum is not a list")

    types = _types(out, where)
    if types is not None and not types <= _TYPES:
        raise _NotStrict(f"{where}: unknown type in {out['type']!r}")

    if "anyOf" in out:
        branches = out["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise _NotStrict(f"{where}: anyOf is not a non-empty list")
        out["anyOf"] = [_convert(b, f"{path}anyOf.{i}.") for i, b in enumerate(branches)]

    if "allOf" in out:
        members = out["allOf"]
        if not isinstance(members, list) or len(members) != 1:
            # Closing each member object would make their conjunction unsatisfiable.
            raise _NotStrict(f"{where}: allOf with more than one member")
        out["allOf"] = [_convert(members[0], f"{path}allOf.0.")]

    object_keys = {"properties", "required", "additionalProperties"} & set(out)
    if is_object_schema(out):
        _convert_object(out, path, where)
    elif object_keys:
        raise _NotStrict(f"{where}: {sorted(object_keys)} on a schema that is not an object")

    if "items" in out:
        if types is not None and "array" not in types:
            raise _NotStrict(f"{where}: items on a schema that is not an array")
        out["items"] = _convert(out["items"], f"{path}items.")
    elif types is not None and "array" in types:
        raise _NotStrict(f"{where}: an array with no items schema")

    if not ({"type", "anyOf", "allOf", "$ref", "enum", "const"} & set(out)):
        raise _NotStrict(f"{where}: a schema that accepts any value")
    return out


def _kept_keywords(schema: Any, path: str, where: str) -> Schema:
    """``schema``'s keywords that strict mode takes (annotations dropped), subschemas not yet
    converted; what is not a subschema is copied."""
    if not isinstance(schema, dict):
        raise _NotStrict(f"{where}: a boolean or non-object schema")
    out: Schema = {}
    for key, value in schema.items():
        if key in _DROPPED or key.startswith("x-"):
            continue
        if key == "$id" and not path:
            continue  # the root's own id: every $ref is local, so it is not needed
        if key not in _KEPT:
            raise _NotStrict(f"{where}: keyword {key!r} is not supported in strict mode")
        # What is not rebuilt below (enum, const, type, required) is copied, so the answer
        # shares nothing mutable with the caller's schema.
        rebuilt = key in _REBUILT or not isinstance(value, list | dict)
        out[key] = value if rebuilt else copy.deepcopy(value)
    if "$ref" in out:
        ref = out["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise _NotStrict(f"{where}: only local $refs are supported")
        extra = set(out) - {"$ref", *_ANNOTATIONS}
        if extra:
            raise _NotStrict(f"{where}: $ref alongside {sorted(extra)}")
    return out


def _convert_object(out: Schema, path: str, where: str) -> None:
    if "type" not in out:
        out["type"] = "object"
    closed = out.get("additionalProperties", None)
    if closed is not None and closed is not False:
        raise _NotStrict(f"{where}: additionalProperties other than false (an open object)")
    if "properties" not in out and closed is not False:
        raise _NotStrict(f"{where}: an object with no properties (a free-form dict)")
    properties = out.get("properties", {})
    if not isinstance(properties, dict):
        raise _NotStrict(f"{where}: properties is not an object")
    required = out.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise _NotStrict(f"{where}: required is not a list of names")
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise _NotStrict(f"{where}: required names properties it does not define: {unknown}")
    converted: Schema = {}
    for name, prop in properties.items():
        sub = _convert(prop, f"{path}properties.{name}.")
        converted[name] = sub if name in required else _nullable(sub)
    out["properties"] = converted
    out["required"] = list(converted)
    out["additionalProperties"] = False


def _types(schema: Schema, where: str) -> set[str] | None:
    if "type" not in schema:
        return None
    typ = schema["type"]
    if isinstance(typ, str):
        return {typ}
    if isinstance(typ, list) and typ and all(isinstance(t, str) for t in typ):
        return set(typ)
    raise _NotStrict(f"{where}: type is neither a name nor a list of names")


def is_object_schema(schema: Schema) -> bool:
    """Whether ``schema`` describes an object (its type, or properties without a type)."""
    typ = schema.get("type")
    if typ is None:
        return "properties" in schema
    return typ == "object" or (isinstance(typ, list) and "object" in typ)


def _accepts_null(schema: Schema) -> bool:
    if "type" in schema:
        typ = schema["type"]
        if not (typ == "null" or (isinstance(typ, list) and "null" in typ)):
            return False
        return ("enum" not in schema or None in schema["enum"]) and (
            "const" not in schema or schema["const"] is None
        )
    if "anyOf" in schema and "$ref" not in schema and "allOf" not in schema:
        return any(_accepts_null(b) for b in schema["anyOf"])
    if set(schema) & {"$ref", "allOf"}:
        return False
    if "const" in schema:
        return schema["const"] is None
    return "enum" in schema and None in schema["enum"]


def _nullable(schema: Schema) -> Schema:
    """``schema`` that also accepts ``null`` (already-nullable schemas come back as they are)."""
    if _accepts_null(schema):
        return schema
    constrains = set(schema) & {"$ref", "allOf", "const"}
    if "type" in schema and "anyOf" not in schema and not constrains:
        typ = schema["type"]
        types = typ if isinstance(typ, list) else [typ]
        out = {**schema, "type": types if "null" in types else [*types, "null"]}
        if "enum" in schema:
            out["enum"] = [*schema["enum"], None]
        return out
    if "anyOf" in schema and "type" not in schema and not constrains and "enum" not in schema:
        return {**schema, "anyOf": [*schema["anyOf"], dict(_NULL)]}
    if set(schema) == {"enum", *(set(schema) & set(_ANNOTATIONS))}:
        return {**schema, "enum": [*schema["enum"], None]}
    inner = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    hoisted = {k: schema[k] for k in _ANNOTATIONS if k in schema}
    return {"anyOf": [inner, dict(_NULL)], **hoisted}
