"""A request's reasoning setting as a schema stack's template values (docs/stacks.md)."""

from __future__ import annotations

from typing import Any

from metis.model.knobs import ReasoningEffort
from metis.model.request import ThinkingConfig
from metis.wire.knobs.reasoning import nearest_level

_GEMINI_LEVELS: tuple[ReasoningEffort, ...] = ("minimal", "low", "medium", "high")


def thinking_values(thinking: ThinkingConfig | None) -> dict[str, Any]:
    """``{thinking}`` (whether the thoughts' text is asked for: true, false for display
    ``omitted``, whose reply keeps its signatures), ``{thinking_budget}`` (0 for effort
    ``none``, Gemini 2.5's off), ``{thinking_level}`` (Gemini 3's MINIMAL..HIGH) and
    ``{reasoning_effort}``."""
    if thinking is None:
        return {}
    effort = thinking.effort
    if effort == "none":
        return {"thinking_budget": 0, "reasoning_effort": "none"}
    level = nearest_level(effort, _GEMINI_LEVELS).upper() if effort is not None else None
    return {
        "thinking": thinking.display != "omitted",
        "thinking_budget": thinking.budget_tokens,
        "thinking_level": level,
        "reasoning_effort": effort,
    }
