"""What Anthropic's grammar compiler refuses of a request's strict schemas (its strict tools'
input schemas and its output schema, closed as :mod:`metis.wire.closed_schema` closes them):
more than 20 strict tools, a recursive definition, a property that is a bare ``true``, a limit
of a number, a string's length or an array's size (``closed_schema.LIMITS``), a ``oneOf``, and
more optional or union-typed parameters over all of them than it compiles (0xPlaygrounds/rig's
strict_schema_limits and strict_schema_matrix cassettes, vkryukov/req_llm's object_basic
fixtures, BerriAI/litellm#39115, strands-agents/harness-sdk#2664: all 400). The emulator
refuses by these rules and the gateway leaves out what breaks them (docs/gateway.md); the
messages are Anthropic's. The compiler's ceiling on the size of the grammar all of a request's
strict schemas make ("The compiled grammar is too large, ...": anthropics/anthropic-sdk-python
#1185) is not documented, so not checked (docs/emulator.md)."""

from __future__ import annotations

from typing import Any

from metis.wire.closed_schema import LIMITS, limited_types, refused_limits

MAX_STRICT_TOOLS, MAX_OPTIONAL, MAX_UNIONS = 20, 24, 16
"""Anthropic's limits over all of a request's strict schemas (rig's strict_schema_limits
cassettes: 21 strict tools, 25 optional parameters and 17 with a union refused; 20, and 24
and 16 across tools, taken)."""

NESTED = (
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
"""Where a schema holds the schemas it is made of."""


def too_many_tools(tools: int) -> str | None:
    if tools <= MAX_STRICT_TOOLS:
        return None
    return (
        f"Too many strict tools ({tools}). The maximum number of strict tools supported is "
        f"{MAX_STRICT_TOOLS}. Try reducing the number of tools marked as strict."
    )


def too_many_parameters(optional: int, unions: int) -> str | None:
    """Anthropic's refusal of ``optional`` optional and ``unions`` union-typed parameters over
    all of a request's strict schemas, or None when it compiles them."""
    if optional > MAX_OPTIONAL:
        return (
            f"Schemas contains too many optional parameters ({optional}), which would make "
            "grammar compilation inefficient. Reduce the number of optional parameters in your "
            f"tool schemas (limit: {MAX_OPTIONAL})."
        )
    if unions > MAX_UNIONS:
        return (
            f"Schemas contains too many parameters with union types ({unions} parameters with "
            "type arrays or anyOf). This causes exponential compilation cost. Reduce the number "
            f"of nullable or union-typed parameters (limit: {MAX_UNIONS} parameters with unions)."
        )
    return None


def compile_problem(strict: list[tuple[str, Any]], tools: int) -> str | None:
    """Anthropic's refusal of a request's strict schemas (``(where, schema)`` each, ``tools``
    of them its strict tools), or None when it compiles them all."""
    if (problem := too_many_tools(tools)) is not None:
        return problem
    optional = unions = 0
    for at, schema in strict:
        counts = [0, 0]
        if (problem := schema_problem(schema, counts)) is not None:
            return f"{at}: {problem}"
        optional, unions = optional + counts[0], unions + counts[1]
    return too_many_parameters(optional, unions)


def schema_problem(schema: Any, counts: list[int]) -> str | None:
    """What the compiler refuses of one schema in itself (a recursive definition, a property
    given as ``true``, a limit it does not take, a ``oneOf``), or None; counts its optional
    (``counts[0]``) and union-typed (``counts[1]``) properties on the way."""
    if isinstance(schema, dict) and (cycle := _cycle(schema)) is not None:
        return (
            f"Invalid schema: Circular reference detected in schema definitions: "
            f"{' -> '.join(cycle)}. Self-referencing or mutually-referencing definitions "
            "are not supported."
        )
    return _unsupported(schema, counts)


def _unsupported(schema: Any, counts: list[int]) -> str | None:
    if isinstance(schema, list):
        return next((p for s in schema if (p := _unsupported(s, counts)) is not None), None)
    if not isinstance(schema, dict):
        return None
    if (problem := _limit_problem(schema)) is not None:
        return problem
    if "oneOf" in schema:  # (strands-agents/harness-sdk#2664; it takes anyOf)
        return "Schema type 'oneOf' is not supported"
    props = schema.get("properties")
    if isinstance(props, dict):
        if any(isinstance(sub, bool) for sub in props.values()):
            return "For 'object' type, property 'properties' is not supported"
        listed = schema.get("required")
        required = set(listed) if isinstance(listed, list) else set()
        counts[0] += len([name for name in props if name not in required])
        counts[1] += sum(1 for sub in props.values() if _is_union(sub))
    for key in NESTED:
        sub = schema.get(key)
        if key in ("properties", "$defs", "definitions") and isinstance(sub, dict):
            sub = list(sub.values())
        if (problem := _unsupported(sub, counts)) is not None:
            return problem
    return None


def _limit_problem(schema: dict[str, Any]) -> str | None:
    """The compiler's words for the limits of ``schema`` it does not take, or None: several
    named at once, in order ("For 'integer' type, properties maximum, minimum are not
    supported": earendil-works/pi#9953); a ``minItems`` other than 0 or 1 in words of its own
    (ghostlobster/memorize-everything#93)."""
    refused = refused_limits(schema)
    if not refused:
        return None
    # A type list is named by its first type the first refused limit belongs to: the API's
    # words for a type list are not on record, those for each type alone are.
    kind = next(k for k in limited_types(schema) if refused[0] in LIMITS[k])
    refused = [key for key in refused if key in LIMITS[kind]]
    named = sorted(key for key in refused if key != "minItems")
    if len(named) == 1:
        return f"For '{kind}' type, property '{named[0]}' is not supported"
    if named:
        return f"For '{kind}' type, properties {', '.join(named)} are not supported"
    return f"For '{kind}' type, 'minItems' values other than 0 or 1 are not supported"


def _is_union(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    return (isinstance(kind, list) and len(kind) > 1) or "anyOf" in schema


def _cycle(schema: dict[str, Any]) -> list[str] | None:
    """The names along a definition that refers back to itself (``Node -> Node``), or None."""
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
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
