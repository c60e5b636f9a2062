"""Strict schemas a Claude model cannot compile, left out (docs/gateway.md): Anthropic's
grammar compiler refuses what :mod:`metis.wire.anthropic.strict_limits` says; a client of
another API (an OpenAI client's recursive ``response_format``) could not know, so the output
schema that breaks a rule is left out, as for a model with no structured output, and a strict
tool that does goes without ``strict``, each named. The library's own caller gets the
provider's refusal (docs/contract.md)."""

from __future__ import annotations

from typing import Any

from metis.model.capabilities import AdapterCapabilities
from metis.model.request import ToolDefinition
from metis.wire.anthropic.strict_limits import (
    MAX_STRICT_TOOLS,
    schema_problem,
    too_many_parameters,
)
from metis.wire.closed_schema import closed_schema_or_reason


def fit_strict(
    fields: dict[str, Any],
    caps: AdapterCapabilities,
    changes: dict[str, Any],
    dropped: list[str],
) -> None:
    """Leave out (in ``changes``, named in ``dropped``) what of the output schema and the
    strict tools a Claude model (``caps``) cannot compile: the output schema first, then
    each strict tool in order while the request's totals stay within the limits."""
    if caps.reasoning is None or caps.reasoning.family != "anthropic":
        return  # not Claude: the family the catalog gives its reasoning is the one tell
    totals = [0, 0]
    schema = changes.get("output_schema", fields.get("output_schema"))
    if schema is not None and caps.supports_structured_output:
        closed, problem = closed_schema_or_reason(schema)
        problem = problem or _problem(closed, totals)
        if problem is not None:
            changes["output_schema"] = None
            dropped.append(f"output schema (Claude's structured output cannot take it: {problem})")
    tools: list[ToolDefinition] = fields.get("tools") or []
    if not caps.supports_strict_tools or not any(tool.strict for tool in tools):
        return
    sent, strict = [], 0
    for tool in tools:
        closed, problem = closed_schema_or_reason(tool.input_schema) if tool.strict else (None, "")
        if closed is None:  # (not strict; or not closed, which the library sends without it)
            sent.append(tool)
            continue
        if strict >= MAX_STRICT_TOOLS:
            problem = f"over {MAX_STRICT_TOOLS} strict tools"
        else:
            problem = _problem(closed, totals)
        if problem is not None:
            tool = tool.model_copy(update={"strict": False})
            dropped.append(f"strict of tool {tool.name!r} (Claude cannot compile it: {problem})")
        strict += problem is None
        sent.append(tool)
    if any(a is not b for a, b in zip(sent, tools, strict=True)):
        changes["tools"] = sent


def _problem(closed: Any, totals: list[int]) -> str | None:
    """Why ``closed`` (a schema as the encoder closes it) cannot join the strict schemas
    counted in ``totals`` (optional and union-typed parameters so far), or None, counting it
    in."""
    counts = [0, 0]
    if (problem := schema_problem(closed, counts)) is not None:
        return problem
    optional, unions = totals[0] + counts[0], totals[1] + counts[1]
    if (problem := too_many_parameters(optional, unions)) is not None:
        return problem
    totals[:] = [optional, unions]
    return None
