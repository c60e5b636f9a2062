"""schema_cleanup: take out of tool input schemas the JSON-schema keywords a provider refuses.

Some providers accept only a subset of JSON Schema for tool parameters (Gemini's
``functionDeclarations.parameters`` is an OpenAPI subset: ``additionalProperties`` or
``$ref`` there is a 400 ``Unknown name``). The stack lists the keywords in ``remove``; the
stage removes them wherever they stand as schema keywords (never a property that happens to
share the name, never inside ``enum`` or ``default`` values), and logs one structured WARN per
tool and keyword, naming every place it was removed from, once per process (a tool sent on
every call is warned of on the first); ``quiet_closed_objects`` takes ``additionalProperties:
false`` out without one.

Two rewrites keep meaning instead of losing it: ``inline_refs`` replaces a local ``$ref``
(``#/$defs/...``, ``#/definitions/...``) with the schema it points to (a recursive reference
cannot be inlined and is removed, with the WARN), and ``nullable_type_lists`` turns
``type: [string, "null"]`` into ``type: string, nullable: true`` (a list of several non-null
types becomes an ``anyOf``). ``output_schema`` applies the same to the request's
``output_schema``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from metis.model.request import CanonicalRequest
from metis.model.schema_forms import form
from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage
from metis.stages.options import SchemaCleanupOptions

log = logging.getLogger("metis")

Schema = dict[str, Any]

# Where a schema holds other schemas: name -> schema maps, single schemas, lists of schemas.
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_SCHEMA_ONE = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
    }
)
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_REF_PREFIXES = ("#/$defs/", "#/definitions/")


class SchemaCleanup(RequestStage[CanonicalRequest]):
    name = "schema_cleanup"

    Options = SchemaCleanupOptions

    options: SchemaCleanupOptions

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        update: dict[str, Any] = {}
        tools = []
        for tool in request.tools:
            cleaned, removed = form(tool.input_schema, self._form_key(), self.clean)
            if removed:
                _warn(call, f"tool {tool.name!r}", removed, tool=tool.name)
            if cleaned is not tool.input_schema:
                tool = tool.model_copy(update={"input_schema": cleaned})
            tools.append(tool)
        if any(a is not b for a, b in zip(tools, request.tools, strict=True)):
            update["tools"] = tools
        if self.options.output_schema and request.output_schema is not None:
            cleaned, removed = self.clean(request.output_schema)
            if removed:
                _warn(call, "the output schema", removed, tool=None)
            if cleaned is not request.output_schema:
                update["output_schema"] = cleaned
        return request.model_copy(update=update) if update else request

    def _form_key(self) -> tuple[Any, ...]:
        """What a tool's cleaned schema depends on beside the schema: kept with it
        (:mod:`metis.model.schema_forms`), the same object for every call that sends it."""
        o = self.options
        return (self.name, *o.remove, o.inline_refs, o.nullable_type_lists, o.quiet_closed_objects)

    def clean(self, schema: Schema) -> tuple[Schema, dict[str, list[str]]]:
        """``schema`` without the listed keywords (the very same object when nothing changed),
        and for each removed keyword, the places it was removed from."""
        walk = _Walk(self.options, schema)
        cleaned = walk.schema(schema, "")
        if walk.unresolved:
            for key, place in walk.definitions:
                walk.removed[key].append(place)
        return (cleaned if walk.changed else schema), dict(walk.removed)


class _Walk:
    def __init__(self, options: SchemaCleanupOptions, root: Schema) -> None:
        self.remove = frozenset(options.remove)
        self.inline = options.inline_refs
        self.nullable = options.nullable_type_lists
        self.quiet_closed = options.quiet_closed_objects
        self.root = root
        self.removed: dict[str, list[str]] = defaultdict(list)
        self.changed = False
        self.definitions: list[tuple[str, str]] = []
        self.unresolved = False
        self._expanding: list[str] = []

    def schema(self, node: Any, where: str) -> Any:
        if not isinstance(node, dict):
            return node  # true / false schemas, or something this stage need not judge
        ref = node.get("$ref")
        if self.inline and isinstance(ref, str) and ref.startswith(_REF_PREFIXES):
            target = self._target(ref)
            if target is None or ref in self._expanding:
                self.unresolved = True
            else:
                self.changed = True
                self._expanding.append(ref)
                try:
                    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
                    return self.schema(merged, where)
                finally:
                    self._expanding.pop()
        out: Schema = {}
        for key, value in node.items():
            if key in self.remove:
                self.changed = True
                place = where.rstrip(".") or "the root"
                if self.inline and key in ("$defs", "definitions"):
                    self.definitions.append((key, place))  # a loss only if a $ref stayed
                elif self.quiet_closed and key == "additionalProperties" and value is False:
                    pass  # a closed object opened: nothing the model reads is lost
                else:
                    self.removed[key].append(place)
                continue
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                value = {n: self.schema(s, f"{where}{key}.{n}.") for n, s in value.items()}
            elif key in _SCHEMA_ONE:
                value = (
                    [self.schema(s, f"{where}{key}.{i}.") for i, s in enumerate(value)]
                    if isinstance(value, list)
                    else self.schema(value, f"{where}{key}.")
                )
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                value = [self.schema(s, f"{where}{key}.{i}.") for i, s in enumerate(value)]
            out[key] = value
        if self.nullable and isinstance(out.get("type"), list):
            self.changed = True
            _type_list(out)
        return out

    def _target(self, ref: str) -> Schema | None:
        section, _, name = ref[2:].partition("/")
        found = self.root.get(section)
        if not isinstance(found, dict):
            return None
        target = found.get(name.replace("~1", "/").replace("~0", "~"))
        return target if isinstance(target, dict) else None


def _type_list(schema: Schema) -> None:
    listed = schema.pop("type")
    types = [t for t in listed if t != "null"]
    if len(types) == 1:
        schema["type"] = types[0]
    elif types:
        schema["anyOf"] = [{"type": t} for t in types]
    else:
        schema["type"] = "null"
    if types and "null" in listed:
        schema["nullable"] = True


# What was warned of, once per process: the same tool sent again says nothing new.
_warned: set[tuple[str, str, str, tuple[str, ...]]] = set()
_MAX_WARNED = 10_000  # forgotten (and warned of again) past this many distinct removals


def _warn(call: Call, what: str, removed: dict[str, list[str]], tool: str | None) -> None:
    for keyword, places in removed.items():
        seen = (call.provider, what, keyword, tuple(places))
        if seen in _warned:
            continue
        if len(_warned) >= _MAX_WARNED:
            _warned.clear()
        _warned.add(seen)
        log.warning(
            "schema_cleanup: removed %r from %s for %s (at %s)",
            keyword,
            what,
            call.provider,
            ", ".join(places),
            extra={
                "event": "metis.schema_cleanup",
                "session_id": call.session_id,
                "request_id": call.request_id,
                "adapter": call.provider,
                "tool": tool,
                "keyword": keyword,
                "paths": places,
            },
        )
