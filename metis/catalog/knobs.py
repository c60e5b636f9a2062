"""What each model takes of the request's knobs: how it is asked to reason, and the sampling
settings it refuses (docs/reasoning.md has the table this code holds).

Neither models.dev nor genai-prices records these, so they are read from the model's name, by
family and version, as the reasoning form is (``metis/catalog/build.py``). A catalog entry may
state them itself (``reasoning_levels``, ``refuses_sampling``: a models.yaml ``catalog:`` block),
which wins. Sources, per family:

- Claude: adaptive thinking from 4.6, ``xhigh`` and adaptive-only from Opus 4.7 and the 5
  models (Fable and Mythos among them), no sampling settings on those (400 "temperature is
  deprecated for this model"); Fable, Mythos and Opus from 5.5 think always (no
  ``disabled``: AWS's adaptive-thinking page, Anthropic's Opus 5.5 page); budgets from 1024
  and below ``max_tokens``.
- OpenAI: ``reasoning_effort`` levels per model (o-series low..high; gpt-5 minimal..high;
  gpt-5.1 none..high; gpt-5.2 and later none..xhigh); reasoning models refuse temperature,
  top_p and the penalties, GPT-5.1 and later take them with effort ``none``.
- Gemini 2.5: ``thinkingBudget`` (Pro 128-32768 and never off; Flash 0-24576; Flash-Lite
  512-24576, 0 is off); Gemini 3: ``thinkingLevel`` (Pro low/high, 3.1 Pro low..high, Flash
  minimal..high), never off.
- Claude 4.5 and 4.6 (Haiku, Sonnet, Opus) take temperature or top_p, not both (400
  "`temperature` and `top_p` cannot both be specified for this model", on Anthropic and
  Bedrock alike).
- OpenAI o3 and o4-mini refuse ``stop``; so does xAI's grok-4 (docs.x.ai "Reasoning").
- xAI: grok-3-mini takes low/high; grok-4 reasons always and refuses the penalties.
- DeepSeek: V4 (and any model but the legacy ``deepseek-reasoner``) thinks by default and
  stops with ``thinking: {type: disabled}``, its effort ``low``, ``high`` or ``max``; thinking,
  it ignores temperature and the penalties (api-docs.deepseek.com "Thinking Mode");
  ``deepseek-reasoner`` never stops. Amazon Nova 2
  takes low..high and can stop.
- OpenAI o1-mini and o1-preview take no system or developer message (400 "Unsupported value:
  'messages[0].role' does not support 'system' with this model.", pydantic/pydantic-ai's
  test_openai_o1_mini_system_role cassettes); a catalog entry's ``system_prompt`` wins.
- Mistral: its reasoning models (Small 4, Medium 3.5, Magistral) take ``reasoning_effort``
  ``none`` or ``high`` only (models.dev#1986, checked live; vercel/ai#13688).
"""

from __future__ import annotations

import re
from functools import lru_cache

from metis.catalog.first_party import family_of
from metis.catalog.model_info import ModelInfo
from metis.model.knobs import (
    EFFORT_ORDER,
    ReasoningEffort,
    ReasoningProfile,
    SamplingName,
    SettingRules,
)

_CLAUDE = re.compile(
    r"claude-(?:(?P<tier>opus|sonnet|haiku|fable|mythos)-)?(?P<major>\d+)"
    r"(?:[-.](?P<minor>\d)(?!\d))?"
)
_CLAUDE_UNNUMBERED = re.compile(r"claude-(?P<tier>fable|mythos)-(?!\d)")
"""A Fable or Mythos model named without a version (``claude-mythos-preview``): of the 5s."""
_CLAUDE_OLD = re.compile(r"claude-(?P<major>\d)-(?P<minor>\d)-(?P<tier>opus|sonnet|haiku)")
_GPT5 = re.compile(r"gpt-5(?:\.(?P<minor>\d+))?")
_GEMINI = re.compile(r"gemini-(?P<major>\d+)(?:\.(?P<minor>\d+))?")
_PENALTIES = ("frequency_penalty", "presence_penalty")
_OPENAI_REASONING_REFUSES = ("temperature", "top_p", *_PENALTIES)
_CLAUDE_SAMPLING = ("temperature", "top_p", "top_k")
_DEEPSEEK_THINKING_IGNORES = ("temperature", *_PENALTIES)
_NO_SYSTEM_PROMPT = re.compile(r"o1-(?:mini|preview)")
_CLAUDE_ONE_OF: tuple[tuple[SamplingName, ...], ...] = (("temperature", "top_p"),)


def _levels(*names: ReasoningEffort) -> tuple[ReasoningEffort, ...]:
    return tuple(level for level in EFFORT_ORDER if level in names)


def _name(model_id: str) -> str:
    """The model's own name: no region, vendor or route prefix (``us.anthropic.`` ...)."""
    name = model_id.lower().rsplit("/", 1)[-1]
    name = re.sub(r"^(?:us|eu|apac|ap|jp|au|ca|global)\.", "", name)
    vendor, dot, rest = name.partition(".")
    return rest if dot and vendor.isalpha() else name


def reasoning_profile(info: ModelInfo) -> ReasoningProfile | None:
    """How ``info``'s model is asked to reason; None when it does not reason, or when nothing
    is known of how (the request's setting then goes as it is)."""
    name, family = _name(info.id), family_of(info.id)
    if not info.reasoning and not (
        info.reasoning is None and family == "claude" and _claude_version(name) is not None
    ):  # a catalog entry silent on reasoning (claude-opus-5): a Claude model's name says
        return None
    profile = None
    if family == "claude":
        profile = _claude(name, info.max_output_tokens)
    elif family in ("gpt", "o1", "o3", "o4", "codex"):
        profile = _openai(name)
    elif family == "gemini":
        profile = _gemini(name)
    elif family == "grok":
        profile = _grok(name)
    elif family == "deepseek":
        profile = _deepseek(name)
    elif family in ("mistral", "magistral"):
        profile = ReasoningProfile(form="effort", levels=_levels("none", "high"), family="mistral")
    elif family == "nova":
        profile = ReasoningProfile(
            form="effort", levels=_levels("none", "low", "medium", "high"), family="nova"
        )
    if profile is not None and info.reasoning_levels is not None:
        levels = _levels(*info.reasoning_levels)  # type: ignore[arg-type]
        profile = profile.model_copy(
            update={"levels": levels, "can_disable": "none" in levels, "form": "effort"}
        )
    return profile


def refused_sampling(info: ModelInfo) -> tuple[str, ...]:
    """The sampling settings ``info``'s model refuses whatever the request (a catalog entry's
    own ``refuses_sampling`` first)."""
    if info.refuses_sampling is not None:
        return tuple(info.refuses_sampling)
    name, family = _name(info.id), family_of(info.id)
    refused: tuple[str, ...] = ()
    if family == "claude" and _claude_version(name) is not None:
        version, tier = _claude_version(name) or ((0, 0), None)
        if _claude_sampling_gone(version, tier):
            refused = _CLAUDE_SAMPLING
    elif family == "grok" and name.startswith("grok-4"):
        refused = _PENALTIES
    elif family in ("o1", "o3", "o4") or (
        family == "gpt" and _gpt5_minor(name) == 0 and "chat" not in name
    ):  # gpt-5-chat-latest took a temperature (pydantic/pydantic-ai's model_capabilities)
        refused = _OPENAI_REASONING_REFUSES
    takes_it_unreasoning = family == "gpt" and (_gpt5_minor(name) or 0) >= 1
    if info.temperature is False and "temperature" not in refused and not takes_it_unreasoning:
        refused = ("temperature", *refused)
    return refused


def setting_rules(info: ModelInfo) -> SettingRules | None:
    """What ``info``'s model refuses beyond the ranges; None: nothing known."""
    name, family = _name(info.id), family_of(info.id)
    rules = SettingRules(
        one_at_a_time=_CLAUDE_ONE_OF if _claude_one_of(name, family) else (),
        refuses_stop=_refuses_stop(name, family),
        refuses_forced_tool_choice=family == "claude" and _claude_refuses_forcing(name),
    )
    return rules if rules != SettingRules() else None


def takes_system_prompt(info: ModelInfo) -> bool | None:
    """Whether ``info``'s model takes a system prompt (an entry's own ``system_prompt`` first);
    None: nothing known, the stack's declaration stands."""
    if info.system_prompt is not None:
        return info.system_prompt
    return False if _NO_SYSTEM_PROMPT.match(_name(info.id)) else None


def _refuses_stop(name: str, family: str | None) -> bool:
    """Whether the model refuses ``stop``: the o-series but o3-mini (which honours it), the
    first gpt-5 models (not their chat model), Grok 4."""
    if family in ("o1", "o3", "o4"):
        return not name.startswith("o3-mini")
    if family == "gpt":
        return _gpt5_minor(name) == 0 and "chat" not in name
    return family == "grok" and name.startswith("grok-4")


@lru_cache(maxsize=256)  # read of the name alone; asked once per message a call
def openai_cache_generation(model_id: str) -> str | None:
    """How an OpenAI model takes prompt-caching settings: ``breakpoints`` (gpt-5.6 and later:
    ``prompt_cache_breakpoint`` on content parts, ``prompt_cache_options``; the deprecated
    ``prompt_cache_retention`` has no effect), ``24h`` (gpt-5.5: retention ``24h`` only), None
    (the rest: retention ``in_memory`` or ``24h``)."""
    name = _name(model_id)
    minor = _gpt5_minor(name)
    later = re.match(r"gpt-(\d+)", name)
    if (minor is not None and minor >= 6) or (later is not None and int(later[1]) >= 6):
        return "breakpoints"
    return "24h" if minor == 5 else None


def _claude_one_of(name: str, family: str | None) -> bool:
    """Claude 4.5 and 4.6 refuse temperature and top_p together (the models after them
    refuse both, whatever the other)."""
    version = _claude_version(name) if family == "claude" else None
    if version is None:
        return False
    number, tier = version
    return tier is not None and number >= (4, 5) and not _claude_sampling_gone(number, tier)


def _claude_refuses_forcing(name: str) -> bool:
    """Opus from 5.5, Fable and Mythos from 5.1 answer ``tool_choice`` any or tool with a 400
    (Anthropic's Opus 5.5 page: "Forced tool use returns an error", also on Fable 5.1)."""
    found = _claude_version(name)
    if found is None:
        return False
    version, tier = found
    return version >= ((5, 5) if tier == "opus" else (5, 1)) and tier in ("opus", "fable", "mythos")


def _claude_sampling_gone(version: tuple[int, int], tier: str | None) -> bool:
    return version >= (5, 0) or (tier == "opus" and version >= (4, 7))


def _claude_version(name: str) -> tuple[tuple[int, int], str | None] | None:
    match = _CLAUDE.search(name) or _CLAUDE_OLD.search(name)
    if match is None:
        unnumbered = _CLAUDE_UNNUMBERED.search(name)
        return ((5, 0), unnumbered["tier"]) if unnumbered else None
    return (int(match["major"]), int(match["minor"] or 0)), match["tier"]


def claude_thinks_unasked(model_id: str) -> bool:
    """Whether a Claude model thinks when the request says nothing of thinking (the 5 models:
    the Opus 5 migration guide), so switching it off takes ``thinking: {type: disabled}``;
    before them (Opus 4.7 and 4.8 among them) it thinks only when asked."""
    found = _claude_version(_name(model_id))
    return found is not None and found[0] >= (5, 0)


def _claude_always_thinks(version: tuple[int, int], tier: str | None) -> bool:
    """Fable and Mythos, and Opus from 5.5: thinking cannot be switched off (400
    "thinking.type.disabled is not supported for this model")."""
    return tier in ("fable", "mythos") or (tier == "opus" and version >= (5, 5))


def _claude(name: str, max_output: int | None) -> ReasoningProfile:
    version, tier = _claude_version(name) or ((3, 7), None)
    budget_max = max_output - 1 if max_output else None
    if version < (4, 6):
        return ReasoningProfile(
            form="budget", budget_min=1024, budget_max=budget_max, family="anthropic"
        )
    newest = version >= (5, 0) or (tier == "opus" and version >= (4, 7))
    always = _claude_always_thinks(version, tier)
    levels: tuple[ReasoningEffort, ...] = ("low", "medium", "high", "xhigh", "max")
    levels = (levels if always else ("none", *levels)) if newest else ()
    return ReasoningProfile(
        form="adaptive",
        levels=_levels(*levels) if newest else _levels("none", "low", "medium", "high", "max"),
        can_disable=not always,
        budget_min=None if newest else 1024,
        budget_max=None if newest else budget_max,
        family="anthropic",
    )


def _gpt5_minor(name: str) -> int | None:
    match = _GPT5.search(name)
    return int(match["minor"] or 0) if match else None


def _openai(name: str) -> ReasoningProfile:
    if "gpt-oss" in name:
        return ReasoningProfile(
            form="effort", levels=_levels("low", "medium", "high"), can_disable=False,
            family="openai",
        )  # fmt: skip
    minor = _gpt5_minor(name)
    if minor is None:  # the o-series
        return ReasoningProfile(
            form="effort", levels=_levels("low", "medium", "high"), can_disable=False,
            family="openai",
        )  # fmt: skip
    if (always := _always_reasons(name, minor)) is not None:
        return always
    if minor == 0:
        return ReasoningProfile(
            form="effort", levels=_levels("minimal", "low", "medium", "high"),
            can_disable=False, family="openai",
        )  # fmt: skip
    # gpt-5.6 takes max (0xPlaygrounds/rig's gpt_5_6_reasoning effort_max cassette: 200)
    above: tuple[ReasoningEffort, ...] = ("xhigh", "max")
    top = above[: (minor >= 2) + (minor >= 6)]
    return ReasoningProfile(
        form="effort",
        levels=_levels("none", "low", "medium", "high", *top),
        family="openai",
        sampling_only_without_reasoning=_OPENAI_REASONING_REFUSES,
    )


def _always_reasons(name: str, minor: int) -> ReasoningProfile | None:
    """GPT-5's pro models, its and 5.1's codex models, and the chat models from 5.1, which cannot
    stop reasoning: the levels OpenAI listed refusing ``none`` (pydantic/pydantic-ai's
    test_model_capabilities cassettes), so a temperature is refused whatever the request;
    None for the others."""
    if "codex" in name and minor <= 1:  # gpt-5.3-codex took effort none and a temperature
        levels = _levels("low", "medium", "high", *(("xhigh",) if "max" in name else ()))
    elif "-pro" in name:
        levels = _levels("high") if minor == 0 else _levels("medium", "high", "xhigh")
    elif "chat" in name and minor >= 1:
        levels = _levels("medium")
    else:
        return None
    return ReasoningProfile(
        form="effort", levels=levels, can_disable=False, family="openai",
        sampling_only_without_reasoning=_OPENAI_REASONING_REFUSES, reasons_by_default=True,
    )  # fmt: skip


def _gemini(name: str) -> ReasoningProfile | None:
    match = _GEMINI.search(name)
    if match is None:
        return None
    version = (int(match["major"]), int(match["minor"] or 0))
    if version >= (3, 0):
        if "flash" in name:
            levels = _levels("minimal", "low", "medium", "high")
        elif version >= (3, 1):
            levels = _levels("low", "medium", "high")
        else:
            levels = _levels("low", "high")
        return ReasoningProfile(form="effort", levels=levels, can_disable=False, family="google")
    if "flash-lite" in name:
        return ReasoningProfile(form="budget", budget_min=512, budget_max=24576, family="google")
    if "flash" in name:
        return ReasoningProfile(form="budget", budget_min=1, budget_max=24576, family="google")
    return ReasoningProfile(
        form="budget", budget_min=128, budget_max=32768, can_disable=False, family="google"
    )


def _deepseek(name: str) -> ReasoningProfile:
    if name.startswith("deepseek-reasoner"):
        return ReasoningProfile(
            form="effort", levels=_levels("low", "medium", "high", "max"), can_disable=False,
            family="deepseek",
        )  # fmt: skip
    levels = _levels("none", "low", "high", "max")
    return ReasoningProfile(
        form="effort",
        levels=levels,
        family="deepseek",
        reasons_by_default=True,
        sampling_only_without_reasoning=_DEEPSEEK_THINKING_IGNORES,
    )


def _grok(name: str) -> ReasoningProfile:
    if name.startswith("grok-3-mini"):
        return ReasoningProfile(
            form="effort", levels=_levels("low", "high"), can_disable=False, family="xai"
        )
    return ReasoningProfile(form="always", can_disable=False, family="xai")
