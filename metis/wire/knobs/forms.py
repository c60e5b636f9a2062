"""Reasoning in one wire form, for a codec whose model the catalog did not describe (the
fitted request already has the form its model takes): the tables of :mod:`.reasoning`."""

from __future__ import annotations

from metis.model.knobs import ReasoningEffort
from metis.model.request import ThinkingConfig
from metis.wire.knobs.reasoning import (
    EFFORT_BUDGETS,
    PORTABLE_LEVELS,
    effort_for_budget,
    nearest_level,
)


def effort_of(
    thinking: ThinkingConfig, levels: tuple[ReasoningEffort, ...] = PORTABLE_LEVELS
) -> ReasoningEffort:
    """The effort to send: the one asked for (fitted to the model already where the catalog
    knows it), or the table's for the budget, within ``levels``."""
    if thinking.effort is not None:
        return thinking.effort
    return nearest_level(effort_for_budget(thinking.budget_tokens or 0), levels)


def budget_of(thinking: ThinkingConfig, ceiling: int | None = None) -> int:
    """The budget to send: the one asked for, or the table's for the effort, at most
    ``ceiling``."""
    if thinking.budget_tokens is not None:
        budget = thinking.budget_tokens
    else:
        budget = EFFORT_BUDGETS.get(thinking.effort or "medium", EFFORT_BUDGETS["medium"])
    return min(budget, ceiling) if ceiling is not None else budget
