"""The ``strict_schema`` stage: OpenAI strict mode (structured outputs) where it is safe.

Strict mode constrains decoding to a subset of JSON Schema: every object closed
(``additionalProperties: false``), every property required, optional ones expressed as
nullable. :func:`to_strict_schema` rewrites a schema into that subset, or answers ``None``
when it cannot without changing what the schema means (a free-form dict, ``oneOf``,
``patternProperties``, a length constraint strict mode does not take...). The stage applies it
to an OpenAI Chat body's function tools and ``json_schema`` response format; a tool it cannot
convert stays non-strict, with one INFO record saying why.

Strict mode makes the model send ``"offset": null`` where the caller's schema said the key may
be absent, so for the tools it made strict the stage also removes, from each
:class:`~metis.model.events.ToolUseEnd` and the final :class:`~metis.model.content.ToolUseBlock`,
the ``null`` values of keys that were optional in the caller's own schema. (The streamed
``partial_json`` fragments are the provider's bytes as received and keep their nulls.)
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.model.content import ToolUseBlock
from metis.model.events import MessageComplete, StreamEvent, ToolUseEnd
from metis.pipeline.call import Call
from metis.pipeline.stage import Inner, Stage
from metis.pipeline.wire import WireRequest

log = logging.getLogger("metis")

Schema = dict[str, Any]

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
    if not _is_object(schema):
        raise _NotStrict("the root schema is not an object schema")
    return _convert(schema, "")


def _convert(schema: Any, path: str) -> Schema:
    """One schema (not made nullable) in the strict subset."""
    where = path.rstrip(".") or "the root"
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

    for key in ("$defs", "definitions"):
        if key in out:
            defs = out[key]
            if not isinstance(defs, dict):
                raise _NotStrict(f"{where}: {key} is not an object")
            out[key] = {name: _convert(d, f"{path}{key}.{name}.") for name, d in defs.items()}

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
    if _is_object(out):
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


def _is_object(schema: Schema) -> bool:
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


# Restoring the caller's semantics on the way out ----------------------------------------


def strip_optional_nulls(value: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """``value`` without the ``None`` values of keys that ``schema`` (the caller's original
    schema, the root for ``$ref``s) leaves optional, at every object level it describes.
    Gives back ``value`` itself when there is nothing to remove; never modifies it."""
    cleaned = _strip(value, schema, schema, 0)
    return cleaned if isinstance(cleaned, dict) else value


_MAX_DEPTH = 64


def _strip(value: Any, schema: Any, root: Schema, depth: int) -> Any:
    if depth > _MAX_DEPTH or not isinstance(schema, dict):
        return value
    schema = _resolve(schema, root)
    if schema is None:
        return value
    if isinstance(value, dict):
        target = _object_schema(schema, root)
        if target is None:
            return value
        properties = target.get("properties")
        if not isinstance(properties, dict):
            return value
        required = target.get("required", [])
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if key not in properties:
                continue
            if item is None:
                if key not in required:
                    out = dict(value) if out is None else out
                    del out[key]
                continue
            cleaned = _strip(item, properties[key], root, depth + 1)
            if cleaned is not item:
                out = dict(value) if out is None else out
                out[key] = cleaned
        return value if out is None else out
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return value
        new = [_strip(v, items, root, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(new, value, strict=True)) else new
    return value


def _object_schema(schema: Schema, root: Schema) -> Schema | None:
    """The schema that describes a dict value: ``schema`` itself, its single ``allOf``
    member, or its only object branch of ``anyOf``."""
    if "properties" in schema:
        return schema
    for key in ("allOf", "anyOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            resolved = [_resolve(b, root) for b in branches if isinstance(b, dict)]
            objects = [b for b in resolved if b is not None and _is_object(b)]
            if len(objects) == 1:
                return _object_schema(objects[0], root)
    return None


def _resolve(schema: Schema, root: Schema) -> Schema | None:
    """Follow a local ``$ref`` (a few hops at most); ``None`` if it leads nowhere."""
    for _ in range(8):
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        target: Any = root
        if ref != "#":
            if not ref.startswith("#/"):
                return None
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    return None
                target = target[part]
        if not isinstance(target, dict):
            return None
        schema = target
    return None


# The stage ------------------------------------------------------------------------------


class StrictSchema(Stage[WireRequest, WireRequest, StreamEvent, StreamEvent]):
    name = "strict_schema"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        tools: bool = True
        response_format: bool = True

    options: Options

    def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        request, originals = self.convert(request, call)
        if not originals:  # nothing made strict: nothing to restore on the way out
            return inner(request, call)
        return self._restore(request, call, inner, originals)

    def convert(self, request: WireRequest, call: Call) -> tuple[WireRequest, dict[str, Schema]]:
        """The request with its body made strict where it can be, and the original parameter
        schema of each tool made strict, by tool name."""
        body = request.body
        originals: dict[str, Schema] = {}
        new_body: dict[str, Any] | None = None

        tools = body.get("tools")
        if self.options.tools and isinstance(tools, list) and tools:
            new_tools = [self._tool(tool, call, originals) for tool in tools]
            if any(a is not b for a, b in zip(new_tools, tools, strict=True)):
                new_body = {**body, "tools": new_tools}

        fmt = body.get("response_format")
        if self.options.response_format and isinstance(fmt, dict):
            new_fmt = self._response_format(fmt, call)
            if new_fmt is not fmt:
                new_body = {**(new_body or body), "response_format": new_fmt}

        if new_body is None:
            return request, originals
        return dataclasses.replace(request, body=new_body), originals

    def _tool(self, tool: Any, call: Call, originals: dict[str, Schema]) -> Any:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return tool
        function = tool.get("function")
        if not isinstance(function, dict) or function.get("strict") is False:
            return tool  # not a Chat function tool, or the caller turned strict mode off
        name = function.get("name")
        # An omitted ``parameters`` is OpenAI's "no parameters": the empty object.
        params = function.get("parameters", {"type": "object", "properties": {}})
        converted, reason = strict_schema_or_reason(params)
        if converted is None:
            log.info("strict_schema: tool %r left non-strict: %s", name, reason)
            return tool
        if isinstance(name, str):
            originals[name] = params
        return {**tool, "function": {**function, "parameters": converted, "strict": True}}

    def _response_format(self, fmt: dict[str, Any], call: Call) -> dict[str, Any]:
        spec = fmt.get("json_schema")
        if fmt.get("type") != "json_schema" or not isinstance(spec, dict):
            return fmt
        if spec.get("strict") is False or "schema" not in spec:
            return fmt
        converted, reason = strict_schema_or_reason(spec["schema"])
        if converted is None:
            log.info(
                "strict_schema: response format %r left non-strict: %s", spec.get("name"), reason
            )
            return fmt
        return {**fmt, "json_schema": {**spec, "schema": converted, "strict": True}}

    async def _restore(
        self,
        request: WireRequest,
        call: Call,
        inner: Inner[WireRequest, StreamEvent],
        originals: dict[str, Schema],
    ) -> AsyncIterator[StreamEvent]:
        async for event in inner(request, call):
            if isinstance(event, _RESTORED):
                if isinstance(event, ToolUseEnd):
                    schema = originals.get(event.tool_name)
                    if schema is not None:
                        event.final_input = strip_optional_nulls(event.final_input, schema)
                else:
                    event.final_content = _restore_blocks(event.final_content, originals)
            yield event


_RESTORED = (ToolUseEnd, MessageComplete)


def _restore_blocks(blocks: list[Any], originals: dict[str, Schema]) -> list[Any]:
    out: list[Any] | None = None
    for i, block in enumerate(blocks):
        if not isinstance(block, ToolUseBlock):
            continue
        schema = originals.get(block.name)
        if schema is None:
            continue
        cleaned = strip_optional_nulls(block.input, schema)
        if cleaned is not block.input:
            out = list(blocks) if out is None else out
            out[i] = block.model_copy(update={"input": cleaned})
    return blocks if out is None else out
