"""The sampling settings a request may send to the routed model (docs/contract.md §13).

A setting the stack's API does not take, or the model refuses (from the catalog), is left out
with a warning: the same request must be sendable to every model of a route. A value outside
the range the stack declares would be refused by the provider, so it is an error before
anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metis.model.knobs import SAMPLING_NAMES, ReasoningProfile, SamplingRanges, SettingRules
from metis.model.request import CanonicalRequest, ThinkingConfig


def fit_sampling(
    request: CanonicalRequest,
    ranges: SamplingRanges | None,
    profile: ReasoningProfile | None,
    thinking: ThinkingConfig | None,
    warn: Callable[[str, str], None],
) -> tuple[dict[str, Any], list[str]]:
    """The request fields to clear (as an update) and the out-of-range problems, one phrase
    each; ``warn(name, reason)`` for each setting left out."""
    update: dict[str, Any] = {}
    problems: list[str] = []
    if thinking is not None:
        reasoning_on = thinking.effort != "none"
    else:
        reasoning_on = profile is not None and profile.reasons_by_default
    for name in SAMPLING_NAMES:
        value = getattr(request, name)
        if value is None:
            continue
        if ranges is not None and name not in ranges:
            update[name] = None
            warn(name, f"{name} is not taken by this provider or model; it was not sent")
            continue
        if profile is not None and reasoning_on and name in profile.sampling_only_without_reasoning:
            update[name] = None
            warn(name, f"{name} is applied only with reasoning off (effort 'none'); not sent")
            continue
        low, high = ranges.get(name, (None, None)) if ranges is not None else (None, None)
        if (low is not None and value < low) or (high is not None and value > high):
            problems.append(f"{name} {value} is outside the provider's range {_shown(low, high)}")
    return update, problems


def fit_setting_rules(
    request: CanonicalRequest,
    rules: SettingRules | None,
    cleared: dict[str, Any],
    warn: Callable[[str, str], None],
) -> dict[str, Any]:
    """The request fields to clear for what the model refuses beyond the ranges: of settings it
    takes one at a time, all but the first set (``cleared``: already left out); stop sequences
    where it refuses them. ``warn(name, reason)`` for each."""
    if rules is None:
        return {}
    update: dict[str, Any] = {}
    for group in rules.one_at_a_time:
        present = [n for n in group if getattr(request, n) is not None and n not in cleared]
        for name in present[1:]:
            update[name] = None
            warn(name, f"the model takes {present[0]} or {name}, not both; {name} was not sent")
    if rules.refuses_stop and request.stop_sequences:
        update["stop_sequences"] = []
        warn("stop_sequences", "the model takes no stop sequences; they were not sent")
    return update


def sampling_fields(request: CanonicalRequest) -> dict[str, Any]:
    """The sampling settings set on ``request``, under the names OpenAI and most APIs use."""
    return {name: value for name in SAMPLING_NAMES if (value := getattr(request, name)) is not None}


def _shown(low: float | None, high: float | None) -> str:
    return f"[{'-inf' if low is None else _num(low)}, {'inf' if high is None else _num(high)}]"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
