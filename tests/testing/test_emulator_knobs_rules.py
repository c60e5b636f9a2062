"""What the emulator refuses of reasoning and sampling settings, per model, one case per rule
(metis/testing/emulator/formats/knobs_rules.py): a regression that sends a model what it
refuses shows as a refused request."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator

from .test_emulator_rules import BASES, Base, Body, Case, message_of, put, same

CHAT = {"authorization": "Bearer k"}
GEMINI = {"x-goog-api-key": "k"}
HI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
MY_BASES = {
    **BASES,
    "gemini_pro": Base("/v1beta/models/gemini-2.5-pro:generateContent", GEMINI, HI),
    "openrouter": Base(
        "/api/v1/chat/completions",
        CHAT,
        {"model": "openai/gpt-5", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "deepseek": Base(
        "/chat/completions",
        CHAT,
        {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]},
    ),
}
ADAPTIVE = {"type": "adaptive"}

CASES = {
    "a-adaptive-on-a-budget-model": Case(
        "anthropic", put(thinking=ADAPTIVE), 400, "'adaptive' is not supported for this model"
    ),
    "a-sampling-on-opus-4-8": Case(
        "anthropic",
        put(model="claude-opus-4-8", temperature=0.5),
        400,
        "`temperature` is deprecated for this model.",
    ),
    "a-xhigh-on-sonnet-4-6": Case(
        "anthropic",
        put(model="claude-sonnet-4-6", thinking=ADAPTIVE, output_config={"effort": "xhigh"}),
        400,
        "output_config.effort: Input should be 'low', 'medium', 'high', 'max'",
    ),
    "a-effort-on-a-budget-model": Case(
        "anthropic",
        put(output_config={"effort": "high"}),
        400,
        "effort is not supported for this model",
    ),
    "c-temperature-on-o3": Case(
        "chat",
        put(model="o3", temperature=0.5),
        400,
        "Unsupported parameter: 'temperature' is not supported with this model.",
    ),
    "c-top-p-while-gpt-5-1-reasons": Case(
        "chat",
        put(model="gpt-5.1", reasoning_effort="high", top_p=0.5),
        400,
        "Unsupported parameter: 'top_p' is not supported with this model.",
    ),
    "c-xhigh-on-gpt-5": Case(
        "chat",
        put(model="gpt-5", reasoning_effort="xhigh"),
        400,
        "'reasoning_effort' does not support 'xhigh' with this model",
    ),
    "c-top-p-out-of-range": Case("chat", put(top_p=1.5), 400, "Invalid 'top_p'"),
    "c-penalty-out-of-range": Case(
        "chat", put(presence_penalty=3), 400, "Invalid 'presence_penalty'"
    ),
    "c-openrouter-fields-elsewhere": Case(
        "chat",
        put(reasoning={"effort": "high"}),
        400,
        "Unrecognized request argument supplied: reasoning",
    ),
    "r-minimal-on-gpt-5-1": Case(
        "responses",
        put(model="gpt-5.1", reasoning={"effort": "minimal"}),
        400,
        "'reasoning.effort' does not support 'minimal' with this model",
    ),
    "r-temperature-on-o3": Case(
        "responses",
        put(model="o3", temperature=1.0),
        400,
        "Unsupported parameter: 'temperature'",
    ),
    "g-level-on-gemini-2-5": Case(
        "gemini",
        put(generationConfig={"thinkingConfig": {"thinkingLevel": "HIGH"}}),
        400,
        "Thinking level HIGH is not supported for this model.",
    ),
    "g-level-gemini-3-pro-lacks": Case(
        "gemini3",
        put(generationConfig={"thinkingConfig": {"thinkingLevel": "MEDIUM"}}),
        400,
        "Thinking level MEDIUM is not supported for this model.",
    ),
    "g-level-and-budget": Case(
        "gemini3",
        put(generationConfig={"thinkingConfig": {"thinkingLevel": "HIGH", "thinkingBudget": 9}}),
        400,
        "thinking_budget and thinking_level are not supported together.",
    ),
    "g-pro-cannot-stop": Case(
        "gemini_pro",
        put(generationConfig={"thinkingConfig": {"thinkingBudget": 0}}),
        400,
        "Budget 0 is invalid. This model only works in thinking mode.",
    ),
    "g-budget-out-of-range": Case(
        "gemini",
        put(generationConfig={"thinkingConfig": {"thinkingBudget": 50000}}),
        400,
        "The thinking budget 50000 is invalid",
    ),
    "g-top-p-out-of-range": Case(
        "gemini", put(generationConfig={"topP": 2}), 400, "generation_config.top_p"
    ),
    "a-temperature-and-top-p-on-sonnet-4-5": Case(
        "anthropic",
        put(temperature=0.5, top_p=0.9),
        400,
        "`temperature` and `top_p` cannot both be specified for this model.",
    ),
    "a-temperature-and-top-p-on-opus-4-6": Case(
        "anthropic",
        put(model="claude-opus-4-6", temperature=0.5, top_p=0.9),
        400,
        "`temperature` and `top_p` cannot both be specified for this model.",
    ),
    "b-temperature-and-top-p-on-claude-4-5": Case(
        "converse",
        put(inferenceConfig={"maxTokens": 10, "temperature": 0.5, "topP": 0.9}),
        400,
        "`temperature` and `top_p` cannot both be specified for this model.",
    ),
    "c-stop-on-o3": Case(
        "chat",
        put(model="o3", stop=["END"]),
        400,
        "Unsupported parameter: 'stop' is not supported with this model.",
    ),
    "c-stop-on-o4-mini": Case(
        "chat",
        put(model="o4-mini", stop=["END"]),
        400,
        "Unsupported parameter: 'stop' is not supported with this model.",
    ),
    "c-stop-on-grok-4": Case(
        "chat",
        put(model="grok-4", stop=["END"]),
        400,
        "Unsupported parameter: 'stop' is not supported with this model.",
    ),
    "d-effort-none": Case(
        "deepseek",
        put(reasoning_effort="none"),
        400,
        "reasoning_effort: expected one of",
    ),
    "d-thinking-of-another-type": Case(
        "deepseek",
        put(thinking={"type": "adaptive"}),
        400,
        "thinking.type: expected 'enabled' or 'disabled'",
    ),
    "b-temperature-out-of-range": Case(
        "converse",
        put(inferenceConfig={"maxTokens": 10, "temperature": 1.5}),
        400,
        "Value at 'inferenceConfig.temperature' failed to satisfy constraint",
    ),
}
ACCEPTED = {
    "sonnet-4-5-temperature-alone": ("anthropic", put(temperature=0.5)),
    "sonnet-4-5-top-p-alone": ("anthropic", put(top_p=0.9)),
    "sonnet-4-temperature-and-top-p": (
        "anthropic",
        put(model="claude-sonnet-4-20250514", temperature=0.5, top_p=0.9),
    ),
    "gpt-4o-stop": ("chat", put(stop=["END"])),
    "deepseek-thinking-off": ("deepseek", put(thinking={"type": "disabled"})),
    "deepseek-thinking-max": (
        "deepseek",
        put(thinking={"type": "enabled"}, reasoning_effort="max"),
    ),
    "openrouter-reasoning": ("openrouter", put(reasoning={"effort": "high"})),
    "gpt-5-1-temperature-without-reasoning": (
        "chat",
        put(model="gpt-5.1", reasoning_effort="none", temperature=0.5),
    ),
    "gemini-3-level": (
        "gemini3",
        put(generationConfig={"thinkingConfig": {"thinkingLevel": "LOW"}}),
    ),
    "opus-4-7-xhigh": (
        "anthropic",
        put(model="claude-opus-4-7", thinking=ADAPTIVE, output_config={"effort": "xhigh"}),
    ),
}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with Emulator() as emulator, httpx.Client(base_url=emulator.url, timeout=10) as client:
        yield client


def _send(client: httpx.Client, base: str, change: Callable[[Body], Any]) -> httpx.Response:
    path, headers, body = MY_BASES[base]
    return client.post(
        path,
        content=json.dumps(change(copy.deepcopy(body))).encode(),
        headers={"content-type": "application/json", **headers},
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_knob_rule_refuses_what_breaks_it(http: httpx.Client, name: str) -> None:
    case = CASES[name]
    response = _send(http, case.base, case.change)
    assert response.status_code == case.status, response.text
    assert case.fragment in message_of(response), response.text


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_what_the_model_takes_is_accepted(http: httpx.Client, name: str) -> None:
    base, change = ACCEPTED[name]
    assert _send(http, base, change).status_code == 200
    assert _send(http, base, same).status_code == 200
