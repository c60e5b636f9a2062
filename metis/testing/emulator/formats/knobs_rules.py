"""What each API refuses of reasoning and sampling settings, per model, in its own words: the
levels each model has, and the settings reasoning models refuse (the ranges, and DeepSeek's
values, are rows of the tables). The per-model
facts are the model catalog's (metis/catalog/knobs.py), so a request metis lets through that a
model would refuse is refused here too (docs/emulator.md).
"""

from __future__ import annotations

from typing import Any

from metis.catalog.knobs import reasoning_profile, refused_sampling, setting_rules
from metis.catalog.model_info import ModelInfo
from metis.model.knobs import ReasoningProfile
from metis.testing.emulator.rules import Refused


def _model_facts(provider: str, model: str) -> tuple[ReasoningProfile | None, tuple[str, ...]]:
    info = ModelInfo(provider=provider, id=model, reasoning=True)
    return reasoning_profile(info), refused_sampling(info)


ONE_AT_A_TIME = "`{0}` and `{1}` cannot both be specified for this model. Please use only one."
"""Anthropic's words (and Bedrock's, for Claude) for two settings a model takes one at a time."""


def _one_at_a_time(provider: str, model: str, present: Any) -> None:
    rules = setting_rules(ModelInfo(provider=provider, id=model))
    for group in rules.one_at_a_time if rules is not None else ():
        both = [name for name in group if present(name)]
        if len(both) > 1:
            raise Refused(ONE_AT_A_TIME.format(*both))


def check_openai(body: dict[str, Any], call: Any, default_temperature: bool = False) -> None:
    """OpenAI Chat and Responses (the ranges are rows of ``tables/openai.yaml``): a reasoning
    model's levels, and the sampling settings (and ``stop``) it refuses while it reasons
    (``default_temperature``: but a temperature of 1, its own, as Chat takes it)."""
    model = str(body.get("model", ""))
    rules = setting_rules(ModelInfo(provider="openai", id=model))
    if "stop" in body and rules is not None and rules.refuses_stop:
        message = "Unsupported parameter: 'stop' is not supported with this model."
        raise Refused(message, "stop", "unsupported_parameter")
    if not (model.startswith(("o1", "o3", "o4", "gpt-5"))):
        return
    profile, refused = _model_facts("openai", model)
    reasoning = body.get("reasoning")
    effort = body.get("reasoning_effort") or (
        reasoning.get("effort") if isinstance(reasoning, dict) else None
    )
    param = "reasoning_effort" if "reasoning_effort" in body else "reasoning.effort"
    if profile is not None and effort is not None and effort not in profile.levels:
        raise Refused(
            f"Unsupported value: '{param}' does not support '{effort}' with this model. "
            f"Supported values are: {', '.join(repr(lv) for lv in profile.levels)}.",
            param,
            "unsupported_value",
        )
    reasoning_on = effort not in (None, "none") or not (profile and profile.can_disable)
    held = profile.sampling_only_without_reasoning if profile and reasoning_on else ()
    for name in (*refused, *held):
        default = default_temperature and name == "temperature" and body.get(name) == 1
        if name in body and not default:
            raise Refused(
                f"Unsupported parameter: '{name}' is not supported with this model.",
                name,
                "unsupported_parameter",
            )


DISPLAYS = ("summarized", "omitted")


def thinking_shown(body: dict[str, Any]) -> bool:
    """Whether a Messages reply's thinking blocks hold their text: ``display`` says, else the
    model's default, ``omitted`` (the signature alone) on the adaptive-only models (Claude
    Opus 4.7 on, the Claude 5 models), ``summarized`` before them."""
    thinking = body.get("thinking")
    display = thinking.get("display") if isinstance(thinking, dict) else None
    if display is not None:
        return bool(display == "summarized")
    profile, _ = _model_facts("anthropic", str(body.get("model", "")))
    return not (profile is not None and profile.form == "adaptive" and profile.budget_min is None)


def check_anthropic(body: dict[str, Any], call: Any) -> None:
    """Messages API: the sampling a model refuses, the thinking types and effort levels it
    has."""
    model = str(body.get("model", ""))
    if "claude" not in model:
        return
    profile, refused = _model_facts("anthropic", model)
    given = [name for name, value in body.items() if value != -1]  # -1: the old default, unset
    for name in refused:
        if name in given:
            raise Refused(f"`{name}` is deprecated for this model.")
    _one_at_a_time("anthropic", model, given.__contains__)
    choice = body.get("tool_choice")
    _refuse_forcing("anthropic", model, isinstance(choice, dict) and choice.get("type"))
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if profile is not None and profile.form == "budget" and kind == "adaptive":
        raise Refused("thinking.type: 'adaptive' is not supported for this model; use 'enabled'")
    if kind == "disabled" and profile is not None and not profile.can_disable:
        raise Refused(
            '"thinking.type.disabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        )
    display = thinking.get("display") if isinstance(thinking, dict) else None
    if display is not None and display not in DISPLAYS:
        raise Refused(f"thinking.display: Input should be {' or '.join(map(repr, DISPLAYS))}")
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if effort is None:
        return
    levels = profile.levels if profile is not None and profile.levels else ()
    if not levels:
        raise Refused("output_config.effort: effort is not supported for this model")
    if effort not in levels or effort == "none":
        allowed = ", ".join(f"'{lv}'" for lv in levels if lv != "none")
        raise Refused(f"output_config.effort: Input should be {allowed}")


def check_gemini(body: dict[str, Any], call: Any) -> None:
    """generateContent: a thinking level or a budget, as the model takes it (the topP range is
    a row of ``tables/gemini.yaml``)."""
    config = body.get("generationConfig")
    if not isinstance(config, dict):
        return
    thinking = config.get("thinkingConfig")
    if not isinstance(thinking, dict):
        return
    level, budget = thinking.get("thinkingLevel"), thinking.get("thinkingBudget")
    if level is not None and budget is not None:
        raise Refused("thinking_budget and thinking_level are not supported together.")
    profile, _ = _model_facts("google", str(getattr(call, "model", "")))
    if profile is None:
        return
    if level is not None and (profile.form != "effort" or str(level).lower() not in profile.levels):
        raise Refused(f"Thinking level {level} is not supported for this model.")
    if budget is not None and profile.form == "budget":
        if budget == 0 and not profile.can_disable:
            raise Refused("Budget 0 is invalid. This model only works in thinking mode.")
        low, high = profile.budget_min or 0, profile.budget_max or budget
        if budget != 0 and budget != -1 and not low <= budget <= high:
            raise Refused(f"The thinking budget {budget} is invalid. Please choose a value "
                          f"between {low} and {high}.")  # fmt: skip


def check_converse(body: dict[str, Any], call: Any) -> None:
    """Bedrock Converse: a Claude model's settings taken one at a time, and its refusal of a
    forced tool choice, as Anthropic's."""
    model = str(getattr(call, "model", ""))
    choice = (body.get("toolConfig") or {}).get("toolChoice")
    forced = next(iter(choice), None) if isinstance(choice, dict) else None
    _refuse_forcing("bedrock", model, forced)
    config = body.get("inferenceConfig")
    if not isinstance(config, dict):
        return
    wire = {"temperature": "temperature", "top_p": "topP"}
    _one_at_a_time("bedrock", model, lambda n: wire.get(n) in config)


FORCED = 'tool_choice: type "tool" and "any" are not supported for this model.'
"""Claude Opus 5.5's and Fable 5.1's words for a forced tool choice (can1357/oh-my-pi#12939,
anthropics/claude-cookbooks#854, quoting the 400s)."""


def _refuse_forcing(provider: str, model: str, kind: Any) -> None:
    if kind not in ("any", "tool"):
        return
    rules = setting_rules(ModelInfo(provider=provider, id=model))
    if rules is not None and rules.refuses_forced_tool_choice:
        raise Refused(FORCED)
