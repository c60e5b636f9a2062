"""The request's knobs without a network: effort and budget and their tables (docs/reasoning.md),
each model's facts from the catalog, the sampling policy (docs/contract.md §9), provider
options, the one-line calls' options, and reasoning tokens read, summed, priced and exported."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

import metis
from metis.calls.request import build_request, check_call_options
from metis.catalog.knobs import reasoning_profile, refused_sampling, takes_system_prompt
from metis.catalog.model_info import ModelInfo
from metis.catalog.price_rates import ModelPrice
from metis.core.options import UnknownOptionError
from metis.cost import price_usage
from metis.errors import ConfigError, InvalidRequestError
from metis.model import CanonicalRequest, Message, ThinkingConfig, TokenUsage
from metis.model.knobs import ReasoningProfile, SamplingRanges
from metis.sessions.core import add_usage
from metis.telemetry.otel import _usage_attributes
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.knobs.options import OptionTarget, apply_provider_options
from metis.wire.knobs.reasoning import effort_for_budget, fit_reasoning, nearest_level
from metis.wire.knobs.sampling import fit_sampling


def req(**fields: Any) -> CanonicalRequest:
    fields.setdefault("max_output_tokens", 4096)
    return CanonicalRequest(model="p:m", messages=[Message.user("hi")], **fields)


# The canonical setting --------------------------------------------------------------------


def test_thinking_takes_an_effort_or_a_budget_never_both() -> None:
    assert ThinkingConfig(effort="high").budget_tokens is None
    assert ThinkingConfig(budget_tokens=4000).effort is None
    with pytest.raises(ValidationError, match="not both"):
        ThinkingConfig(budget_tokens=4000, effort="high")
    with pytest.raises(ValidationError, match="one of the two"):
        ThinkingConfig()
    with pytest.raises(ValidationError, match="'none', 'minimal'"):
        req(thinking="hgih")


def test_an_effort_or_a_budget_alone_stands_for_the_config() -> None:
    assert req(thinking="low").thinking == ThinkingConfig(effort="low")
    assert req(thinking=3000).thinking == ThinkingConfig(budget_tokens=3000)


def test_the_one_line_calls_take_reasoning_and_the_sampling_settings() -> None:
    check_call_options("complete", {"reasoning": "high", "top_p": 0.5, "seed": 1, "top_k": 3})
    with pytest.raises(UnknownOptionError, match="logprobs"):
        check_call_options("complete", {"logprobs": True})
    adapter = metis.build_adapter("openai", metis.AdapterConfig(api_key="k"))
    made = build_request(adapter, "openai:gpt-5", "hi", {"reasoning": "high", "seed": 3})
    assert (made.thinking, made.seed) == (ThinkingConfig(effort="high"), 3)
    with pytest.raises(ConfigError, match="'openai' must be a mapping"):
        build_request(adapter, "openai:gpt-5", "hi", {"provider_options": {"openai": "flex"}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="not both"):
        build_request(adapter, "openai:gpt-5", "hi", {"reasoning": 1, "thinking": "low"})  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    ("options", "limit"),
    [
        ({}, 4096),
        ({"reasoning": "high"}, 4096 + 16384),  # an effort's budget, by the table
        ({"thinking": ThinkingConfig(effort="medium")}, 4096 + 8192),
        ({"reasoning": "none"}, 4096),
        ({"reasoning": 8000}, 12096),
        ({"thinking": ThinkingConfig(budget_tokens=8000)}, 12096),
        ({"reasoning": 200_000}, 64000),  # the model's own limit caps it
        ({"reasoning": 8000, "max_output_tokens": 9000}, 9000),
    ],
)
def test_a_thinking_budget_asked_for_raises_the_default_reply_limit_by_itself(
    options: dict[str, Any], limit: int
) -> None:
    """Anthropic spends the budget out of max_tokens: under the 4,096 default a budget of 8,000
    was cut to 4,095 (docs/reasoning.md's own example); the default now leaves it whole, and
    an effort's budget too (``high`` and ``medium`` were both 4,095 on Claude Sonnet 4.5)."""
    adapter = metis.build_adapter("anthropic", metis.AdapterConfig(api_key="k"))
    made = build_request(adapter, "anthropic:claude-sonnet-4-5", "hi", options)  # type: ignore[arg-type]
    assert made.max_output_tokens == limit


# The tables ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "effort"),
    [(1, "low"), (2047, "low"), (2048, "medium"), (8191, "medium"), (8192, "high"),
     (32767, "high"), (32768, "xhigh"), (65536, "max")],
)  # fmt: skip
def test_a_budget_becomes_the_tables_effort(budget: int, effort: str) -> None:
    assert effort_for_budget(budget) == effort


def test_a_level_the_model_lacks_becomes_the_nearest_the_higher_of_two() -> None:
    assert nearest_level("medium", ("low", "high")) == "high"
    assert nearest_level("xhigh", ("low", "medium", "high", "max")) == "max"
    assert nearest_level("minimal", ("low", "medium", "high")) == "low"
    assert nearest_level("max", ("minimal", "low", "medium", "high")) == "high"


def fitted(thinking: ThinkingConfig, profile: ReasoningProfile, max_output: int = 4096) -> Any:
    warned: list[str] = []
    return fit_reasoning(thinking, profile, max_output, warned.append), warned


ANTHROPIC_BUDGET = ReasoningProfile(
    form="budget", budget_min=1024, budget_max=63999, family="anthropic"
)


def test_an_anthropic_budget_fits_below_the_output_limit() -> None:
    out, warned = fitted(ThinkingConfig(effort="high"), ANTHROPIC_BUDGET, 5000)
    assert out == ThinkingConfig(budget_tokens=4999) and warned == []
    out, warned = fitted(ThinkingConfig(budget_tokens=9000), ANTHROPIC_BUDGET, 5000)
    assert out == ThinkingConfig(budget_tokens=4999) and "4999 was sent" in warned[0]
    out, warned = fitted(ThinkingConfig(effort="low"), ANTHROPIC_BUDGET, 1000)
    assert out is None and "no room" in warned[0]


def test_an_efforts_budget_is_kept_in_range_quietly_a_given_budget_with_a_warning() -> None:
    """docs/reasoning.md: ``xhigh`` to Gemini 2.5 Flash is its most, 24576, with no warning (the
    documented conversion); the same budget asked for by number is brought in with one."""
    flash = reasoning_profile(info("google", "gemini-2.5-flash"))
    assert flash is not None
    assert fitted(ThinkingConfig(effort="xhigh"), flash) == (
        ThinkingConfig(budget_tokens=24576),
        [],
    )
    out, warned = fitted(ThinkingConfig(budget_tokens=32768), flash)
    assert out == ThinkingConfig(budget_tokens=24576) and "outside the model's range" in warned[0]


def test_a_model_that_always_reasons_takes_no_setting_and_says_so() -> None:
    profile = ReasoningProfile(form="always", can_disable=False)
    out, warned = fitted(ThinkingConfig(effort="high"), profile)
    assert out is None and "always reasons" in warned[0]


def test_off_where_the_model_cannot_stop_is_its_least() -> None:
    levels = ReasoningProfile(form="effort", levels=("low", "high"), can_disable=False)
    assert fitted(ThinkingConfig(effort="none"), levels)[0] == ThinkingConfig(effort="low")
    budget = ReasoningProfile(form="budget", budget_min=128, budget_max=32768, can_disable=False)
    out, warned = fitted(ThinkingConfig(effort="none"), budget)
    assert out == ThinkingConfig(budget_tokens=128) and "cannot stop" in warned[0]


def test_a_summary_survives_the_fit() -> None:
    profile = ReasoningProfile(form="effort", levels=("low", "medium", "high"))
    out, _ = fitted(ThinkingConfig(budget_tokens=50000, summary="concise"), profile)
    assert out == ThinkingConfig(effort="high", summary="concise")


# The catalog's facts ------------------------------------------------------------------------


def info(provider: str, model: str, **fields: Any) -> ModelInfo:
    return ModelInfo(provider=provider, id=model, reasoning=True, **fields)


CLAUDE_4_6 = ("none", "low", "medium", "high", "max")
CLAUDE_NEWEST = ("none", "low", "medium", "high", "xhigh", "max")
CLAUDE_ALWAYS = ("low", "medium", "high", "xhigh", "max")
OFF_TO_HIGH = ("none", "low", "medium", "high")


@pytest.mark.parametrize(
    ("provider", "model", "form", "levels", "can_disable"),
    [
        ("anthropic", "claude-sonnet-4-5", "budget", (), True),
        ("anthropic", "claude-sonnet-4-6", "adaptive", CLAUDE_4_6, True),
        ("anthropic", "claude-opus-4-7", "adaptive", CLAUDE_NEWEST, True),
        ("amazon-bedrock", "us.anthropic.claude-opus-4-7-v1:0", "adaptive", CLAUDE_NEWEST, True),
        ("anthropic", "claude-opus-5", "adaptive", CLAUDE_NEWEST, True),
        # Fable and Mythos think always, adaptively (no budget, no "disabled": a 400, AWS's
        # adaptive-thinking page; zed-industries/zed#58980); so does Opus 5.5 (its what's-new
        # page: "thinking can't be disabled")
        ("anthropic", "claude-fable-5", "adaptive", CLAUDE_ALWAYS, False),
        ("anthropic", "claude-fable-5-1", "adaptive", CLAUDE_ALWAYS, False),
        ("amazon-bedrock", "anthropic.claude-mythos-5", "adaptive", CLAUDE_ALWAYS, False),
        ("anthropic", "claude-mythos-preview", "adaptive", CLAUDE_ALWAYS, False),
        ("anthropic", "claude-opus-5-5", "adaptive", CLAUDE_ALWAYS, False),
        ("openai", "o3", "effort", ("low", "medium", "high"), False),
        ("openai", "gpt-5-mini", "effort", ("minimal", "low", "medium", "high"), False),
        ("openai", "gpt-5.1", "effort", OFF_TO_HIGH, True),
        ("openai", "gpt-5.4", "effort", (*OFF_TO_HIGH, "xhigh"), True),
        ("openai", "gpt-5.6", "effort", (*OFF_TO_HIGH, "xhigh", "max"), True),
        ("google", "gemini-2.5-pro", "budget", (), False),
        ("google", "gemini-2.5-flash", "budget", (), True),
        ("google", "gemini-3-pro-preview", "effort", ("low", "high"), False),
        ("google", "gemini-3-flash-preview", "effort", ("minimal", "low", "medium", "high"), False),
        ("xai", "grok-3-mini", "effort", ("low", "high"), False),
        ("xai", "grok-4", "always", (), False),
        ("amazon-bedrock", "amazon.nova-2-lite-v1:0", "effort", OFF_TO_HIGH, True),
    ],
)
def test_each_models_reasoning_is_known_from_the_catalog(
    provider: str, model: str, form: str, levels: tuple[str, ...], can_disable: bool
) -> None:
    profile = reasoning_profile(info(provider, model))
    assert profile is not None
    assert (profile.form, profile.levels, profile.can_disable) == (form, levels, can_disable)


def test_a_model_that_does_not_reason_has_no_profile() -> None:
    assert reasoning_profile(ModelInfo(provider="openai", id="gpt-4o", reasoning=False)) is None


def test_the_sampling_a_model_refuses_is_known_and_an_entry_may_say_it() -> None:
    assert refused_sampling(info("anthropic", "claude-opus-4-7")) == (
        "temperature",
        "top_p",
        "top_k",
    )
    assert refused_sampling(info("anthropic", "claude-sonnet-5")) == (
        "temperature",
        "top_p",
        "top_k",
    )
    assert refused_sampling(info("anthropic", "claude-sonnet-4-6")) == ()
    assert refused_sampling(info("anthropic", "claude-fable-5")) == (
        "temperature",
        "top_p",
        "top_k",
    )
    # a catalog entry that does not say whether a Claude model reasons: its name does
    unsaid = ModelInfo(provider="anthropic", id="claude-opus-5")
    assert unsaid.reasoning is None and reasoning_profile(unsaid) is not None
    assert "temperature" in refused_sampling(info("openai", "o3"))
    assert refused_sampling(info("openai", "gpt-5.1", temperature=False)) == ()
    assert refused_sampling(info("x", "mine", refuses_sampling=("seed",))) == ("seed",)
    levels = reasoning_profile(info("openai", "gpt-5.1", reasoning_levels=("low", "high")))
    assert levels is not None and levels.levels == ("low", "high") and not levels.can_disable


def test_the_catalog_narrows_the_stacks_sampling_by_what_the_model_refuses() -> None:
    adapter = metis.build_adapter("anthropic", metis.AdapterConfig(api_key="k"))
    caps = adapter.capabilities_for("claude-opus-4-7")
    assert caps.sampling == {} and caps.reasoning is not None
    assert set(adapter.capabilities_for("claude-sonnet-4-5").sampling or {}) == {
        "temperature", "top_p", "top_k",
    }  # fmt: skip


def test_the_catalog_says_which_models_take_no_system_prompt() -> None:
    """o1-mini and o1-preview refuse a system or developer message (OpenAI's 400); an entry's
    own ``system_prompt`` wins; a model the catalog says nothing of keeps its stack's word."""
    for name in ("o1-mini", "o1-preview-2024-09-12", "openai/o1-mini", "o1-mini-2024-09-12"):
        assert takes_system_prompt(info("openai", name)) is False, name
    for name in ("o1", "o3-mini", "gpt-4o", "gpt-5.1"):
        assert takes_system_prompt(info("openai", name)) is None, name
    assert takes_system_prompt(info("x", "mine", system_prompt=False)) is False
    assert takes_system_prompt(info("openai", "o1-mini", system_prompt=True)) is True
    adapter = metis.build_adapter("openai", metis.AdapterConfig(api_key="k"))
    assert adapter.capabilities_for("o1-mini").supports_system_prompt is False
    assert adapter.capabilities_for("o1-mini-2099-01-01").supports_system_prompt is False
    assert adapter.capabilities_for("o1").supports_system_prompt is True
    router = metis.build_adapter("openrouter", metis.AdapterConfig(api_key="k"))
    assert router.capabilities_for("openai/o1-mini").supports_system_prompt is False


# Sampling -----------------------------------------------------------------------------------


def test_a_setting_not_taken_is_cleared_with_a_warning_and_one_out_of_range_is_a_problem() -> None:
    warned: list[tuple[str, str]] = []
    ranges: SamplingRanges = {"temperature": (0.0, 1.0), "top_p": (0.0, 1.0)}
    update, problems = fit_sampling(
        req(temperature=1.5, seed=3, top_p=0.5), ranges, None, None,
        lambda name, why: warned.append((name, why)),
    )  # fmt: skip
    assert update == {"seed": None}
    assert [name for name, _ in warned] == ["seed"]
    assert problems == ["temperature 1.5 is outside the provider's range [0, 1]"]


def test_a_stack_that_declares_nothing_sends_every_setting() -> None:
    update, problems = fit_sampling(req(top_k=5, seed=1), None, None, None, lambda n, w: None)
    assert (update, problems) == ({}, [])


# Provider options ---------------------------------------------------------------------------


def target() -> OptionTarget:
    body = {"model": "m", "reasoning": {"effort": "high"}, "messages": []}
    return OptionTarget(body=body, headers={"x-api-key": "k"}, url="https://h/v1/x?a=1")


def test_options_for_this_provider_are_merged_and_others_ignored() -> None:
    request = req(
        provider_options={
            "openai": {"service_tier": "flex", "reasoning": {"summary": "detailed"}},
            "anthropic": {"service_tier": "priority"},
        },
        extra_headers={"openai": {"OpenAI-Beta": "x"}},
        extra_query={"openai": {"trace": "1"}},
    )
    out = apply_provider_options(request, ["azure", "openai"], target(), "azure")
    assert out.body["service_tier"] == "flex"
    assert out.body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert out.headers["OpenAI-Beta"] == "x" and out.url == "https://h/v1/x?a=1&trace=1"
    untouched = target()
    assert apply_provider_options(request, ["gemini"], untouched, "gemini") is untouched


@pytest.mark.parametrize(
    "fields",
    [
        {"provider_options": {"p": {"model": "other"}}},
        {"provider_options": {"p": {"stream": True}}},
        {"extra_headers": {"p": {"x-api-key": "stolen"}}},
        {"extra_headers": {"p": {"Content-Type": "text/plain"}}},
        {"extra_query": {"p": {"key": "k"}}},
    ],
)
def test_an_option_that_would_override_what_metis_sets_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError, match="is set by metis"):
        apply_provider_options(req(**fields), ["p"], target(), "p")


# Reasoning tokens ---------------------------------------------------------------------------


def read(codec_name: str, body: dict[str, Any], settings: dict[str, Any] | None = None) -> Any:
    builder = MessageBuilder(provider="p", model="p:m")
    get_codec(codec_name, settings).parse_body(body, builder)
    return builder.token_usage()


def test_reasoning_tokens_are_read_from_each_providers_usage() -> None:
    chat = read("openai_chat", {
        "id": "c", "model": "gpt-5", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 50,
                  "completion_tokens_details": {"reasoning_tokens": 40}},
    })  # fmt: skip
    assert (chat.output_tokens, chat.reasoning_tokens) == (50, 40)
    responses = read("openai_responses", {
        "id": "r", "model": "gpt-5", "status": "completed", "object": "response",
        "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "hi", "annotations": []}]}],
        "usage": {"input_tokens": 5, "output_tokens": 30,
                  "output_tokens_details": {"reasoning_tokens": 20}},
    })  # fmt: skip
    assert (responses.output_tokens, responses.reasoning_tokens) == (30, 20)
    anthropic = read("anthropic", {
        "id": "msg", "type": "message", "role": "assistant", "model": "claude",
        "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 70,
                  "output_tokens_details": {"thinking_tokens": 60}},
    })  # fmt: skip
    assert (anthropic.output_tokens, anthropic.reasoning_tokens) == (70, 60)


def test_reasoning_tokens_are_summed_priced_and_exported() -> None:
    usage = TokenUsage(input_tokens=0, output_tokens=1_000_000, reasoning_tokens=400_000)
    total = add_usage(usage, usage)
    assert (total.output_tokens, total.reasoning_tokens) == (2_000_000, 800_000)
    plain = ModelPrice(input=Decimal(1), output=Decimal(10))
    assert price_usage("m", plain, usage, "v").output_usd == Decimal(10)
    apart = ModelPrice(input=Decimal(1), output=Decimal(10), reasoning=Decimal(20))
    assert price_usage("m", apart, usage, "v").output_usd == Decimal(14)  # 0.6*10 + 0.4*20
    assert _usage_attributes(usage)["gen_ai.usage.reasoning.output_tokens"] == 400_000
