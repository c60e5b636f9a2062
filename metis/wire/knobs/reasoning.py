"""Reasoning as the model takes it: the documented tables between efforts and budgets, and the
nearest level a model has (docs/reasoning.md).

Budget -> effort: below 2048 ``low``, below 8192 ``medium``, below 32768 ``high``, below 65536
``xhigh``, else ``max``. Effort -> budget: ``minimal`` 1024, ``low`` 2048, ``medium`` 8192,
``high`` 16384, ``xhigh`` 32768, ``max`` 65536, within the model's budget range (and below the
request's output limit where the budget counts against it, as Anthropic's does). A level the
model lacks becomes the nearest it has (the higher of two as near), with a warning.
"""

from __future__ import annotations

from collections.abc import Callable

from metis.model.knobs import EFFORT_ORDER, ReasoningEffort, ReasoningProfile
from metis.model.request import ThinkingConfig

Warn = Callable[[str], None]
"""Report one setting not applied as asked (the reason, in words)."""

EFFORT_BUDGETS: dict[ReasoningEffort, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 65536,
}
BUDGET_STEPS: tuple[tuple[int, ReasoningEffort], ...] = (
    (2048, "low"),
    (8192, "medium"),
    (32768, "high"),
    (65536, "xhigh"),
)
PORTABLE_LEVELS: tuple[ReasoningEffort, ...] = ("low", "medium", "high")
"""The levels every effort API takes: what a budget becomes for a model the catalog does not
describe."""


def effort_for_budget(budget: int) -> ReasoningEffort:
    """The effort the table gives a token budget."""
    for below, effort in BUDGET_STEPS:
        if budget < below:
            return effort
    return "max"


def nearest_level(effort: ReasoningEffort, levels: tuple[ReasoningEffort, ...]) -> ReasoningEffort:
    """``effort`` if the model has it, else the level it has nearest (the higher of two)."""
    if effort in levels or not levels:
        return effort
    rank = EFFORT_ORDER.index(effort)
    return min(levels, key=lambda lv: (abs(EFFORT_ORDER.index(lv) - rank), -EFFORT_ORDER.index(lv)))


def fit_reasoning(
    thinking: ThinkingConfig,
    profile: ReasoningProfile | None,
    max_output_tokens: int,
    warn: Warn,
) -> ThinkingConfig | None:
    """``thinking`` in the form ``profile``'s model takes; None when it takes no setting."""
    if profile is None:
        return thinking
    if profile.form == "always":
        warn("the model always reasons and takes no reasoning setting; it was not sent")
        return None
    if thinking.effort == "none":
        return _off(thinking, profile, warn)
    uses_budget = profile.form == "budget" or (
        profile.form == "adaptive" and thinking.budget_tokens is not None and profile.budget_max
    )
    if uses_budget:
        return _as_budget(thinking, profile, max_output_tokens, warn)
    return _as_effort(thinking, profile, warn)


def _off(thinking: ThinkingConfig, profile: ReasoningProfile, warn: Warn) -> ThinkingConfig:
    if profile.can_disable:
        return thinking
    if profile.levels:
        lowest = profile.levels[0]
        warn(f"the model cannot stop reasoning; effort 'none' became its lowest, {lowest!r}")
        return thinking.model_copy(update={"effort": lowest})
    lowest_budget = profile.budget_min or EFFORT_BUDGETS["minimal"]
    warn(f"the model cannot stop reasoning; effort 'none' became its least budget, {lowest_budget}")
    return ThinkingConfig(
        budget_tokens=lowest_budget, summary=thinking.summary, display=thinking.display
    )


def _as_budget(
    thinking: ThinkingConfig, profile: ReasoningProfile, max_output_tokens: int, warn: Warn
) -> ThinkingConfig | None:
    asked = thinking.budget_tokens
    budget = asked if asked is not None else EFFORT_BUDGETS[thinking.effort or "medium"]
    ceiling = profile.budget_max
    if profile.family == "anthropic":  # the budget is spent from max_tokens and must be below it
        ceiling = min(ceiling or max_output_tokens, max_output_tokens - 1)
    floor = profile.budget_min or 1
    if ceiling is not None and ceiling < floor:
        warn(
            f"max_output_tokens {max_output_tokens} leaves no room for the least reasoning "
            f"budget ({floor}); reasoning was not asked for"
        )
        return None
    fitted = max(floor, min(budget, ceiling)) if ceiling is not None else max(floor, budget)
    if asked is not None and fitted != asked:
        warn(f"budget_tokens {asked} is outside the model's range; {fitted} was sent")
    return ThinkingConfig(budget_tokens=fitted, summary=thinking.summary, display=thinking.display)


def _as_effort(thinking: ThinkingConfig, profile: ReasoningProfile, warn: Warn) -> ThinkingConfig:
    asked = thinking.effort
    effort = asked if asked is not None else effort_for_budget(thinking.budget_tokens or 0)
    levels = tuple(lv for lv in profile.levels if lv != "none")
    fitted = nearest_level(effort, levels)
    if fitted != effort:
        given = f"effort {asked!r}" if asked else f"budget_tokens {thinking.budget_tokens}"
        warn(f"{given} asks for {effort!r}, which the model lacks; {fitted!r} was sent")
    return ThinkingConfig(effort=fitted, summary=thinking.summary, display=thinking.display)


DEFAULT_REPLY_TOKENS = 4096
"""A reply's limit when no option sets it (within the model's own): it fits most replies."""


def default_reply_tokens(thinking: object) -> int:
    """The reply's limit when no option sets it, before the model's own caps it: 4,096, and
    a ``ThinkingConfig``'s budget more (an effort's by the table), since Anthropic spends the
    budget out of it and OpenAI counts reasoning in it."""
    if not isinstance(thinking, ThinkingConfig):
        return DEFAULT_REPLY_TOKENS
    budget = thinking.budget_tokens
    if budget is None and thinking.effort is not None:
        budget = EFFORT_BUDGETS.get(thinking.effort)
    return DEFAULT_REPLY_TOKENS + (budget if budget is not None and budget > 0 else 0)
