"""Thinking and sampling as a Claude model takes them (Anthropic, Bedrock and Vertex alike).

Thinking: ``{type: enabled, budget_tokens}`` for a budget; ``{type: adaptive, display:
summarized}`` with ``output_config.effort`` for an effort (``low``, ``medium``, ``high``,
``xhigh``, ``max``), or a budget from the table of docs/reasoning.md where the model takes no
adaptive thinking; ``{type: disabled}`` for effort ``none`` (no ``thinking`` at all for an
adaptive-only model that thinks only when asked: Opus 4.7 and 4.8). ``display`` is the
request's (``ThinkingConfig.display``), else ``summarized`` for adaptive thinking: left out it
is ``omitted`` from Claude Opus 4.7 on, thinking blocks coming back as a signature with no
text; a budget sends it only when asked. With thinking on, Anthropic takes only temperature 1,
top_p from 0.95 and no top_k (:mod:`metis.wire.anthropic.rules`): any other is left out with
a warning.
"""

from __future__ import annotations

from typing import Any

from metis.catalog.knobs import claude_thinks_unasked
from metis.model.request import CanonicalRequest, ThinkingConfig
from metis.wire.anthropic.rules import MIN_THINKING_BUDGET, model_traits
from metis.wire.codec import EncodeContext
from metis.wire.knobs.forms import budget_of

_ANTHROPIC_EFFORTS = {"minimal": "low"}
"""Anthropic has no ``minimal``: it is ``low``."""
ADAPTIVE = {"type": "adaptive", "display": "summarized"}


def thinking_type(thinking: ThinkingConfig, wire_model: str) -> str | None:
    """The ``thinking.type`` ``wire_model`` is sent for ``thinking``: ``enabled`` (manual
    thinking, a budget), ``adaptive`` or ``disabled``; None when no ``thinking`` is sent. The
    one place this is decided: the gateway asks it too (Anthropic refuses manual thinking beside
    a forced tool choice)."""
    modes = model_traits(wire_model).thinking_modes
    if thinking.effort == "none":
        if "enabled" not in modes and not claude_thinks_unasked(wire_model):
            return None  # Opus 4.7 and 4.8: off unless asked, and "disabled" is a 400 on Bedrock
        return "disabled"
    if thinking.effort is not None and "adaptive" in modes:
        return "adaptive"
    return "enabled" if "enabled" in modes else "adaptive"


def thinking_fields(thinking: ThinkingConfig, max_tokens: int, wire_model: str) -> dict[str, Any]:
    """The body's ``thinking`` (and ``output_config.effort``) for ``thinking``."""
    kind = thinking_type(thinking, wire_model)
    if kind is None:
        return {}
    if kind == "disabled":
        return {"thinking": {"type": "disabled"}}
    if kind == "adaptive":
        adaptive = {**ADAPTIVE, "display": thinking.display or ADAPTIVE["display"]}
        if thinking.effort is None:
            return {"thinking": adaptive}
        effort = _ANTHROPIC_EFFORTS.get(thinking.effort, thinking.effort)
        return {"thinking": adaptive, "output_config": {"effort": effort}}
    ceiling = (
        None if thinking.budget_tokens is not None else max(max_tokens - 1, MIN_THINKING_BUDGET)
    )
    budget = budget_of(thinking, ceiling)  # a budget given goes as given: pre_send_check checks it
    enabled: dict[str, Any] = {"type": "enabled", "budget_tokens": budget}
    if thinking.display is not None:
        enabled["display"] = thinking.display
    return {"thinking": enabled}


def sampling_fields(
    request: CanonicalRequest, thinking: Any, call: EncodeContext
) -> dict[str, Any]:
    """temperature, top_p and top_k as set, but those thinking does not allow."""
    thinking_on = isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")
    fields: dict[str, Any] = {}
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(request, name)
        if value is None:
            continue
        if thinking_on and not _allowed_with_thinking(name, value):
            call.warn_dropped(name, f"{name} {value} is not allowed with thinking on; not sent")
            continue
        fields[name] = value
    return fields


def _allowed_with_thinking(name: str, value: float) -> bool:
    if name == "temperature":
        return value == 1
    if name == "top_p":
        return 0.95 <= value <= 1
    return False  # top_k
