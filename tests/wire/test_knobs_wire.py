"""Reasoning effort, sampling settings and provider options on the wire, per stack and model:
each request goes through its adapter to the emulator, which refuses what the provider would
(its rule tables, docs/emulator.md), streamed and whole (under asyncio: a wire format is the
same under trio). Every setting not applied as asked is in the result's warnings
(docs/contract.md §9, docs/reasoning.md)."""

from __future__ import annotations

from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import InvalidRequestError
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator

from ..helpers import answer

pytestmark = pytest.mark.backend_independent  # wire formats checked against the emulator

BEDROCK_CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def adapter_for(stack: str, emulator: Emulator, **settings: Any) -> Any:
    provider = "bedrock" if stack.startswith("bedrock") else stack
    config = AdapterConfig(api_key="k", base_url=emulator.base_url(provider), max_retries=0)
    if settings:
        config = AdapterConfig(
            api_key="k", base_url=emulator.base_url(provider), max_retries=0, settings=settings
        )
    return build_adapter(stack, config)


def ask(model: str, **fields: Any) -> CanonicalRequest:
    fields.setdefault("max_output_tokens", 20000)
    return CanonicalRequest(model=model, messages=[Message.user("Hello")], **fields)


def sent(emulator: Emulator) -> dict[str, Any]:
    (body,) = [r.json() for r in emulator.requests]
    return dict(body)


def dropped(response: Any) -> set[str]:
    return {w.block_type for w in response.warnings}


# stack, model, request settings, what the body holds (path -> value), the warnings' kinds
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], set[str]]] = [
    (
        "anthropic",
        "claude-sonnet-4-5",  # budget thinking; top_p only from 0.95 while thinking; no seed
        {"thinking": "high", "top_p": 0.9, "seed": 7},
        {"thinking": {"type": "enabled", "budget_tokens": 16384}, "top_p": None, "seed": None},
        {"top_p", "seed"},
    ),
    (
        "anthropic",
        "claude-opus-4-7",  # adaptive only, takes xhigh, refuses sampling
        {"thinking": "xhigh", "temperature": 0.5},
        {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": "xhigh"},
        },
        {"temperature"},
    ),
    (
        "anthropic",
        "claude-fable-5",  # thinks always, adaptively; no sampling (notes' Fable 5 row)
        {"thinking": "none", "temperature": 0.5},
        {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": "low"},
            "temperature": None,
        },
        {"reasoning", "temperature"},
    ),
    (
        "anthropic",
        "claude-opus-4-7",  # adaptive only, off unless asked: "none" sends no thinking
        {"thinking": "none"},  # (AWS: "disabled" is a 400 on Opus 4.7, Fable 5, Mythos)
        {"thinking": None, "output_config": None},
        set(),
    ),
    (
        "anthropic",
        "claude-opus-5",  # thinks unless told not to: "disabled" (Opus 5 migration guide)
        {"thinking": "none"},
        {"thinking": {"type": "disabled"}},
        set(),
    ),
    (
        "anthropic",
        "claude-opus-5",  # a catalog entry silent on reasoning: the name says adaptive
        {"thinking": 8000},
        {"thinking": {"type": "adaptive", "display": "summarized"}},
        set(),
    ),
    (
        "anthropic",
        "claude-sonnet-4-6",  # no xhigh: the nearest, max
        {"thinking": "xhigh"},
        {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": "max"},
        },
        {"reasoning"},
    ),
    (
        "anthropic",
        "claude-sonnet-4-5",
        {"thinking": "none", "temperature": 0.2, "top_k": 40},
        {"thinking": {"type": "disabled"}, "temperature": 0.2, "top_k": 40},
        set(),
    ),
    (
        "openai",
        "gpt-5.1",  # temperature only with reasoning off
        {"thinking": "high", "temperature": 0.3, "seed": 7},
        {"reasoning_effort": "high", "temperature": None, "seed": 7},
        {"temperature"},
    ),
    (
        "openai",
        "gpt-5.1",
        {"thinking": "none", "temperature": 0.3, "frequency_penalty": 0.5},
        {"reasoning_effort": "none", "temperature": 0.3, "frequency_penalty": 0.5},
        set(),
    ),
    (
        "openai",
        "o3",  # no minimal; refuses top_p; no top_k on OpenAI
        {"thinking": "minimal", "top_p": 0.5, "top_k": 5},
        {"reasoning_effort": "low", "top_p": None, "top_k": None},
        {"reasoning", "top_p", "top_k"},
    ),
    (
        "openai",
        "gpt-5",  # a budget becomes an effort by the table
        {"thinking": 4000},
        {"reasoning_effort": "medium"},
        set(),
    ),
    (
        "openai",
        "gpt-4o",  # does not reason: the effort is left out
        {"thinking": "high", "top_p": 0.5, "max_output_tokens": 1000},
        {"reasoning_effort": None, "top_p": 0.5},
        {"reasoning"},
    ),
    (
        "bedrock",
        "us.amazon.nova-2-lite-v1:0",  # Nova 2: reasoningConfig, low..high
        {"thinking": "xhigh"},
        {
            "additionalModelRequestFields.reasoningConfig": {
                "type": "enabled",
                "maxReasoningEffort": "high",
            }
        },
        {"reasoning"},
    ),
    (
        "bedrock",
        "us.amazon.nova-2-lite-v1:0",
        {"thinking": "none"},
        {"additionalModelRequestFields.reasoningConfig": {"type": "disabled"}},
        set(),
    ),
    (
        "mistral",
        "mistral-small-2603",  # reasoning_effort takes none or high only (models.dev#1986,
        {"thinking": "medium"},  # live; vercel/ai#13688): medium is its nearest, high
        {"reasoning_effort": "high"},
        {"reasoning"},
    ),
    (
        "mistral",
        "mistral-medium-2604",
        {"thinking": "none"},
        {"reasoning_effort": "none"},
        set(),
    ),
    (
        "openai_responses",
        "gpt-5.2",
        {"thinking": {"effort": "xhigh", "summary": "detailed"}, "top_p": 0.5, "seed": 3},
        {"reasoning": {"effort": "xhigh", "summary": "detailed"}, "top_p": None, "seed": None},
        {"top_p", "seed"},
    ),
    (
        "gemini",
        "gemini-2.5-flash",  # a budget model: the effort's budget
        {"thinking": "high", "top_k": 40, "seed": 7, "top_p": 0.9},
        {
            "generationConfig.thinkingConfig": {"thinkingBudget": 16384, "includeThoughts": True},
            "generationConfig.topK": 40,
            "generationConfig.seed": 7,
            "generationConfig.topP": 0.9,
        },
        set(),
    ),
    (
        "gemini",
        "gemini-3-pro-preview",  # low and high only; never off
        {"thinking": "medium"},
        {"generationConfig.thinkingConfig": {"thinkingLevel": "HIGH", "includeThoughts": True}},
        {"reasoning"},
    ),
    (
        "gemini",
        "gemini-2.5-pro",  # cannot stop: its least budget
        {"thinking": "none"},
        {"generationConfig.thinkingConfig": {"thinkingBudget": 128, "includeThoughts": True}},
        {"reasoning"},
    ),
    (
        "gemini",
        "gemini-2.5-flash",
        {"thinking": "none"},
        {"generationConfig.thinkingConfig": {"thinkingBudget": 0}},
        set(),
    ),
    (
        "gemini",
        "gemini-2.5-flash",  # display omitted: no thought text asked for, signatures still come
        {"thinking": {"effort": "high", "display": "omitted"}},
        {"generationConfig.thinkingConfig": {"thinkingBudget": 16384, "includeThoughts": False}},
        set(),
    ),
    (
        "gemini",
        "gemini-3-pro-preview",
        {"thinking": {"effort": "high", "display": "omitted"}},
        {"generationConfig.thinkingConfig": {"thinkingLevel": "HIGH", "includeThoughts": False}},
        set(),
    ),
    (
        "gemini",
        "gemini-3-pro-preview",
        {"thinking": {"effort": "high", "display": "summarized"}},
        {"generationConfig.thinkingConfig": {"thinkingLevel": "HIGH", "includeThoughts": True}},
        set(),
    ),
    (
        "bedrock",
        BEDROCK_CLAUDE,  # Claude's fields passed through; its thinking rules hold
        {"thinking": "high", "top_k": 50, "seed": 1, "temperature": 1.0},
        {
            "additionalModelRequestFields": {
                "thinking": {"type": "enabled", "budget_tokens": 16384}
            },
            "inferenceConfig.temperature": 1.0,
        },
        {"top_k", "seed"},
    ),
    (
        "bedrock_anthropic",
        BEDROCK_CLAUDE,
        {"thinking": "low", "top_p": 0.97},
        {"thinking": {"type": "enabled", "budget_tokens": 2048}, "top_p": 0.97},
        set(),
    ),
    (
        "deepseek",
        "deepseek-reasoner",  # low..high and max: xhigh is as near max as high
        {"thinking": "xhigh"},
        {"reasoning_effort": "max"},
        {"reasoning"},
    ),
    (
        "openrouter",
        "openai/gpt-5",  # OpenRouter's unified reasoning parameter
        {"thinking": "high"},
        {"reasoning": {"effort": "high"}, "reasoning_effort": None},
        set(),
    ),
]


def at(body: dict[str, Any], path: str) -> Any:
    node: Any = body
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("stack", "model", "settings", "expected", "warned"),
    CASES,
    ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)],
)
async def test_each_stack_sends_what_its_model_takes_and_warns_of_the_rest(
    emulator: Emulator,
    stream: bool,
    stack: str,
    model: str,
    settings: dict[str, Any],
    expected: dict[str, Any],
    warned: set[str],
) -> None:
    adapter = adapter_for(stack, emulator)
    response = await answer(adapter, ask(f"{stack}:{model}", **settings), stream)
    body = sent(emulator)
    for path, value in expected.items():
        assert at(body, path) == value, (path, body)
    assert dropped(response) == warned, response.warnings
    assert response.text or response.content


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(("display", "shown"), [("omitted", False), ("summarized", True)])
async def test_gemini_returns_thought_text_only_when_the_display_asks_for_it(
    emulator: Emulator, stream: bool, display: str, shown: bool
) -> None:
    adapter = adapter_for("gemini", emulator)
    thinking = {"effort": "high", "display": display}
    response = await answer(adapter, ask("gemini:gemini-2.5-flash", thinking=thinking), stream)
    thoughts = [b.thinking for b in response.content if b.type == "thinking"]
    assert any(thoughts) is shown, response.content
    assert response.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "model", "settings", "named"),
    [
        ("anthropic", "claude-sonnet-4-5", {"temperature": 1.5}, "temperature 1.5"),
        ("bedrock", BEDROCK_CLAUDE, {"temperature": 1.2}, "temperature 1.2"),
        ("openai", "gpt-4o", {"temperature": 2.5}, "temperature 2.5"),
        ("openai", "gpt-4o", {"presence_penalty": -3}, "presence_penalty -3"),
        ("gemini", "gemini-2.5-flash", {"frequency_penalty": 2.5}, "frequency_penalty 2.5"),
        # OpenAI takes at most 4 stop sequences ("Invalid 'stop': array too long",
        # continuedev/continue#2461), Gemini 5 ("the number of stop_sequences must not
        # exceed 5", continuedev/continue#2702; GenerationConfig.stopSequences "up to 5")
        ("openai", "gpt-4o", {"stop_sequences": list("abcde")}, "5 stop sequences"),
        ("azure", "gpt-4o", {"stop_sequences": list("abcde")}, "at most 4"),
        ("gemini", "gemini-2.5-flash", {"stop_sequences": list("abcdef")}, "at most 5"),
    ],
)
async def test_a_value_out_of_the_providers_range_is_refused_before_sending(
    emulator: Emulator, stack: str, model: str, settings: dict[str, Any], named: str
) -> None:
    adapter = adapter_for(stack, emulator)
    with pytest.raises(InvalidRequestError, match=named):
        await adapter.complete(ask(f"{stack}:{model}", max_output_tokens=1000, **settings))
    assert emulator.requests == []


@pytest.mark.anyio
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "model", "count"),
    [
        ("openai", "gpt-4o", 4),
        ("gemini", "gemini-2.5-flash", 5),
        ("anthropic", "claude-sonnet-4-5", 9),
    ],
)
async def test_as_many_stop_sequences_as_the_provider_takes_are_sent(
    emulator: Emulator, stack: str, model: str, count: int
) -> None:
    stops = [f"<{i}>" for i in range(count)]
    request = ask(f"{stack}:{model}", max_output_tokens=1000, stop_sequences=stops)
    await adapter_for(stack, emulator).complete(request)
    body = sent(emulator)
    assert stops in (
        body.get("stop"),
        body.get("stop_sequences"),
        at(body, "generationConfig.stopSequences"),
    )


@pytest.mark.anyio
async def test_ollama_sends_think_and_its_options(emulator: Emulator) -> None:
    adapter = build_adapter(
        "ollama",
        AdapterConfig(
            base_url=emulator.base_url("ollama"),
            capabilities={"supports_thinking": True},
            settings={"think": "budget", "num_ctx": None},
        ),
    )
    request = ask("ollama:qwen3:8b", max_output_tokens=256, thinking="xhigh", top_k=20, seed=4)
    response = await adapter.complete(request)
    body = sent(emulator)
    assert body["think"] == "high"
    assert body["options"]["top_k"] == 20 and body["options"]["seed"] == 4
    assert response.warnings == []


@pytest.mark.anyio
async def test_ollama_says_how_a_model_is_sent_levels_when_it_drops_one(
    emulator: Emulator,
) -> None:
    """Before, the warning said "the think setting 'budget' sends levels", naming no option."""
    adapter = build_adapter(
        "ollama",
        AdapterConfig(
            base_url=emulator.base_url("ollama"), capabilities={"supports_thinking": True}
        ),
    )
    response = await adapter.complete(
        ask("ollama:qwen3:8b", max_output_tokens=256, thinking="high")
    )
    assert sent(emulator)["think"] is True
    [dropped] = response.warnings
    assert "think: true" in dropped.reason and "settings={'think': 'budget'}" in dropped.reason


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("stack", "model"),
    [
        ("anthropic", "claude-sonnet-4-5"),
        ("openai", "gpt-5.1"),
        ("openai_responses", "gpt-5.2"),
        ("gemini", "gemini-2.5-flash"),
    ],
)
async def test_reasoning_tokens_are_reported_apart_streamed_and_whole(
    emulator: Emulator, stream: bool, stack: str, model: str
) -> None:
    adapter = adapter_for(stack, emulator)
    response = await answer(adapter, ask(f"{stack}:{model}", thinking="low"), stream)
    usage = response.usage
    assert 0 < usage.reasoning_tokens < usage.output_tokens, usage
