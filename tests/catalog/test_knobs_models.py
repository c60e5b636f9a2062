"""Per-model corrections of the settings (metis/catalog/knobs.py, docs/reasoning.md): Claude 4.5
and 4.6 take temperature or top_p, not both; o3, o4-mini and grok-4 take no stop sequences;
DeepSeek switches thinking off with ``thinking: {type: disabled}`` and, thinking (its default),
ignores temperature and the penalties; the Claude 5 models take
``xhigh`` and ``max``; xAI counts reasoning tokens outside ``completion_tokens``. Each request
goes through its adapter to the emulator, which refuses what the provider would (a regression
shows as a refused request), streamed and whole (under asyncio: a wire format is the same
under trio)."""

from __future__ import annotations

from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import OpenAIChatCodec

from ..helpers import answer

pytestmark = pytest.mark.backend_independent  # wire formats checked against the emulator

BEDROCK_CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def adapter_for(stack: str, emulator: Emulator) -> Any:
    provider = "bedrock" if stack.startswith("bedrock") else stack
    config = AdapterConfig(api_key="k", base_url=emulator.base_url(provider), max_retries=0)
    return build_adapter(stack, config)


def at(body: dict[str, Any], path: str) -> Any:
    node: Any = body
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


# stack, model, request settings, what the body holds (path -> value; None: absent), warnings
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], set[str]]] = [
    (
        "anthropic",
        "claude-sonnet-4-5",
        {"temperature": 0.5, "top_p": 0.9},
        {"temperature": 0.5, "top_p": None},
        {"top_p"},
    ),
    (
        "anthropic",
        "claude-haiku-4-5",
        {"top_p": 0.9},
        {"top_p": 0.9},
        set(),
    ),
    (
        "anthropic",
        "claude-opus-4-6",
        {"temperature": 0.2, "top_p": 0.8, "top_k": 10},
        {"temperature": 0.2, "top_p": None, "top_k": 10},
        {"top_p"},
    ),
    (
        "anthropic",
        "claude-sonnet-4-20250514",  # before 4.5: both go
        {"temperature": 0.5, "top_p": 0.9},
        {"temperature": 0.5, "top_p": 0.9},
        set(),
    ),
    (
        "bedrock",
        BEDROCK_CLAUDE,
        {"temperature": 0.5, "top_p": 0.9},
        {"inferenceConfig.temperature": 0.5, "inferenceConfig.topP": None},
        {"top_p"},
    ),
    (
        "bedrock_anthropic",
        BEDROCK_CLAUDE,
        {"temperature": 0.5, "top_p": 0.9},
        {"temperature": 0.5, "top_p": None},
        {"top_p"},
    ),
    ("openai", "o3", {"stop_sequences": ["END"]}, {"stop": None}, {"stop_sequences"}),
    ("openai", "o4-mini", {"stop_sequences": ["END"]}, {"stop": None}, {"stop_sequences"}),
    ("openai", "gpt-4o", {"stop_sequences": ["END"]}, {"stop": ["END"]}, set()),
    ("xai", "grok-4", {"stop_sequences": ["END"]}, {"stop": None}, {"stop_sequences"}),
    (
        "deepseek",
        "deepseek-v4-flash",  # thinks by default; switched off, no effort goes
        {"thinking": "none"},
        {"thinking": {"type": "disabled"}, "reasoning_effort": None},
        set(),
    ),
    (
        "deepseek",
        "deepseek-v4-pro",
        {"thinking": "max"},
        {"thinking": {"type": "enabled"}, "reasoning_effort": "max"},
        set(),
    ),
    (
        "deepseek",
        "deepseek-v4-flash",  # low, high, max: medium is as near high as low, so high
        {"thinking": "medium"},
        {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        {"reasoning"},
    ),
    (
        "deepseek",
        "deepseek-v4-flash",  # thinking by default, it ignores temperature and the penalties
        {"temperature": 0.3, "presence_penalty": 0.5, "top_p": 0.9},
        {"temperature": None, "presence_penalty": None, "top_p": 0.9},
        {"temperature", "presence_penalty"},
    ),
    (
        "deepseek",
        "deepseek-v4-flash",
        {"thinking": "none", "temperature": 0.3},
        {"thinking": {"type": "disabled"}, "temperature": 0.3},
        set(),
    ),
    (
        "anthropic",
        "claude-opus-5",
        {"thinking": "xhigh"},
        {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": "xhigh"},
        },
        set(),
    ),
    (
        "anthropic",
        "claude-opus-5",
        {"thinking": "max", "temperature": 0.5},
        {"output_config": {"effort": "max"}, "temperature": None},
        {"temperature"},
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("stack", "model", "settings", "expected", "warned"),
    CASES,
    ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)],
)
async def test_each_model_gets_the_settings_it_takes(
    emulator: Emulator,
    stream: bool,
    stack: str,
    model: str,
    settings: dict[str, Any],
    expected: dict[str, Any],
    warned: set[str],
) -> None:
    request = CanonicalRequest(
        model=f"{stack}:{model}",
        messages=[Message.user("Hello")],
        max_output_tokens=8000,
        **settings,
    )
    response = await answer(adapter_for(stack, emulator), request, stream)
    (recorded,) = emulator.requests
    assert recorded.status == 200
    body = recorded.json()
    for path, value in expected.items():
        assert at(body, path) == value, (path, body)
    assert {w.block_type for w in response.warnings} == warned, response.warnings


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_xai_reasoning_tokens_are_counted_in_the_output(
    emulator: Emulator, stream: bool
) -> None:
    request = CanonicalRequest(
        model="xai:grok-3-mini",
        messages=[Message.user("Hello")],
        max_output_tokens=2000,
        thinking="low",
    )
    response = await answer(adapter_for("xai", emulator), request, stream)
    usage = response.usage
    assert 0 < usage.reasoning_tokens < usage.output_tokens, usage
    thought = "".join(getattr(b, "thinking", "") for b in response.content)
    assert thought  # grok-3-mini shows its reasoning


@pytest.mark.parametrize(
    ("settings", "completion", "output"),
    [({"reasoning_tokens_apart": True}, 5, 45), ({}, 45, 45)],
    ids=["xai", "openai"],
)
def test_reasoning_tokens_are_added_where_completion_tokens_leave_them_out(
    settings: dict[str, Any], completion: int, output: int
) -> None:
    """xAI's completion_tokens leaves the reasoning out (total_tokens = prompt + completion +
    reasoning); OpenAI's includes it."""
    body = {
        "id": "x",
        "model": "grok-3-mini",
        "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": completion,
            "total_tokens": 57,
            "completion_tokens_details": {"reasoning_tokens": 40},
        },
    }
    codec = OpenAIChatCodec().configured(**settings) if settings else OpenAIChatCodec()
    events = codec.parse_body(body, MessageBuilder("xai", "grok-3-mini"))
    usage = events[-1].usage  # type: ignore[attr-defined]
    assert (usage.output_tokens, usage.reasoning_tokens) == (output, 40)
