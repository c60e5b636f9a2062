"""Projection (docs/gateway.md): a request setting the routed model cannot honour is left out
and reported, never refused; a default the target needs and the client may omit (the output
limit) comes from what the model can serve (its catalog entry)."""

from __future__ import annotations

from typing import Any

from metis.gateway.inbound import Inbound
from metis.gateway.strict_fit import fit_strict
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Message, Role, TextBlock
from metis.model.knobs import SAMPLING_NAMES
from metis.model.request import ThinkingConfig, ToolChoice
from metis.wire.anthropic.knobs import thinking_type
from metis.wire.anthropic.rules import MIN_THINKING_BUDGET

__all__ = ["MIN_THINKING_BUDGET", "lone_instructions", "project"]


def project(
    inbound: Inbound, caps: AdapterCapabilities, wire_model: str
) -> tuple[int, dict[str, Any], list[str]]:
    """The output limit, the fields to change, and what was left out (one phrase each), for the
    model ``caps`` describes, named ``wire_model`` to its provider."""
    changes: dict[str, Any] = {}
    dropped: list[str] = []
    fields = inbound.fields
    limit = inbound.max_output_tokens or caps.max_output_tokens
    if limit > caps.max_output_tokens:
        named = inbound.options.get("limit_field", "max_tokens")  # as the client named it
        dropped.append(f"{named} lowered from {limit} to {caps.max_output_tokens}")
        limit = caps.max_output_tokens
    if fields.get("thinking") is not None:
        thinking = _thinking(fields["thinking"], caps, limit, dropped)
        if thinking is not None and _forced(fields) and _manual(thinking, caps, wire_model):
            dropped.append("thinking (Claude's manual thinking takes no forced tool choice)")
            thinking = None
        if thinking is not fields["thinking"]:
            changes["thinking"] = thinking
    if fields.get("output_schema") is not None and not caps.supports_structured_output:
        changes["output_schema"] = None
        dropped.append("output schema (the model has no structured output)")
    if fields.get("stop_sequences") and not caps.supports_stop_sequences:
        changes["stop_sequences"] = []
        dropped.append("stop sequences (the model takes none)")
    if fields.get("parallel_tool_calls") and not caps.supports_parallel_tool_calls:
        changes["parallel_tool_calls"] = None
        dropped.append("parallel_tool_calls (the model makes one call at a time)")
    choice, rules = fields.get("tool_choice"), caps.setting_rules
    refuses = rules is not None and rules.refuses_forced_tool_choice
    if refuses and choice is not None and choice.type in ("any", "tool"):
        changes["tool_choice"] = None  # the model chooses, as with auto
        dropped.append(f"tool_choice {choice.type} (the model refuses forced tool use)")
    _out_of_range(fields, caps, changes, dropped)
    fit_strict(fields, caps, changes, dropped)
    return limit, changes, dropped


def _out_of_range(
    fields: dict[str, Any], caps: AdapterCapabilities, changes: dict[str, Any], dropped: list[str]
) -> None:
    """The sampling values outside the range the model takes (Claude's temperature is 0 to 1
    where OpenAI's is 0 to 2) left out: the library refuses them for its own caller."""
    for name in SAMPLING_NAMES:
        value, bounds = fields.get(name), (caps.sampling or {}).get(name)
        if value is None or bounds is None:
            continue
        low, high = bounds
        if (low is not None and value < low) or (high is not None and value > high):
            changes[name] = None
            dropped.append(f"{name} {value:g} (the model takes {_range(low, high)})")


def _range(low: float | None, high: float | None) -> str:
    if low is None:
        return f"at most {high:g}"
    return f"at least {low:g}" if high is None else f"{low:g} to {high:g}"


def lone_instructions(inbound: Inbound) -> dict[str, Any]:
    """A request of instructions alone (a system or developer message, ``instructions``, with
    no other message or only blank user text) goes with them as its user message, since
    Anthropic and Gemini take no request without one; the fields to change (none otherwise)."""
    others = [m for m in inbound.messages if m.role is not Role.SYSTEM]
    if any(m.role is not Role.USER or m.text.strip() or _not_text(m) for m in others):
        return {}
    parts = [inbound.fields.get("system_prompt") or ""]
    parts += [m.text for m in inbound.messages if m.role is Role.SYSTEM]
    text = "\n\n".join(part for part in parts if part.strip())
    if not text:
        return {}
    inbound.messages = [Message.user(text)]
    inbound.ignored.append("system prompt (sent as the user message: the request has no other)")
    return {"system_prompt": None}


def _not_text(message: Message) -> bool:
    return any(not isinstance(block, TextBlock) for block in message.content)


def _thinking(
    thinking: ThinkingConfig, caps: AdapterCapabilities, limit: int, dropped: list[str]
) -> ThinkingConfig | None:
    if not (caps.supports_thinking or caps.reasoning is not None):  # gpt-5 on Chat: an effort
        if thinking.effort != "none":  # asking a model that never reasons not to is no loss
            dropped.append("thinking (the model does not think aloud)")
        return None
    if thinking.budget_tokens is None or thinking.budget_tokens < limit:
        return thinking  # an effort level: the adapter fits it to the model
    if limit - 1 < MIN_THINKING_BUDGET:
        dropped.append(f"thinking (the output limit {limit} leaves no room for a budget)")
        return None
    dropped.append(f"thinking budget lowered from {thinking.budget_tokens} to {limit - 1}")
    return ThinkingConfig(
        budget_tokens=limit - 1, summary=thinking.summary, display=thinking.display
    )


def _forced(fields: dict[str, Any]) -> bool:
    choice = fields.get("tool_choice")
    return isinstance(choice, ToolChoice) and choice.type in ("any", "tool")


def _manual(thinking: ThinkingConfig, caps: AdapterCapabilities, wire_model: str) -> bool:
    """Whether ``thinking`` goes to a Claude model as manual thinking (a budget), which
    Anthropic refuses beside a forced tool choice, as metis.wire.anthropic.knobs sends it."""
    profile = caps.reasoning
    if profile is None or profile.family != "anthropic":
        return False
    return thinking_type(thinking, wire_model) == "enabled"
