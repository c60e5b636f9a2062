"""Anthropic's request rules around thinking, tool choice and sampling (issue 12 item 3):
pre_send_check refuses what the Messages API answers with a 400, the encoder never writes
what the API refuses, the emulator refuses the same, and per-model differences come from one
lookup that a model catalog can replace."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis import AdapterConfig, InvalidRequestError, build_adapter
from metis.model import CanonicalRequest, Message, ThinkingConfig, ToolChoice, ToolDefinition
from metis.testing.emulator import Emulator
from metis.wire.anthropic import encode
from metis.wire.anthropic import rules as anthropic_rules
from metis.wire.anthropic.rules import ModelTraits, builtin_model_traits
from metis.wire.rules import anthropic_problems

from ..helpers import make_call

TOOL = {"name": "f", "input_schema": {"type": "object"}}
ASK = [{"role": "user", "content": "hi"}]


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": ASK, **fields}


THINKING = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({**THINKING, "tools": [TOOL], "tool_choice": {"type": "any"}}, "forces tool use"),
        (
            {**THINKING, "tools": [TOOL], "tool_choice": {"type": "tool", "name": "f"}},
            "forces tool use",
        ),
        ({**THINKING, "temperature": 0.5}, "temperature: may only be 1"),
        ({**THINKING, "top_k": 5}, "top_k: may not be set"),
        ({**THINKING, "top_p": 0.5}, "top_p: must be between 0.95 and 1"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1000}}, "at least 1024"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 4096}},
            "`max_tokens` must be greater than `thinking.budget_tokens`",
        ),
        ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "g"}}, "Tool 'g' not found"),
        ({"thinking": {"type": "enabled"}}, "budget_tokens: required"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "none", "disable_parallel_tool_use": True}},
            "only auto, any and tool take it",
        ),
        ({"tool_choice": {"type": "auto"}}, "only be set when tools are given"),
        ({"model": "claude-opus-4-7", "temperature": 0.2}, "takes no sampling parameters"),
        ({"model": "claude-opus-4-7", **THINKING}, "does not accept 'enabled' thinking"),
        ({"thinking": {"type": "adaptive"}}, "does not accept 'adaptive' thinking"),  # 4.5
    ],
)
def test_each_rule_is_found_before_sending(fields: dict[str, Any], expected: str) -> None:
    problems = anthropic_problems(body(**fields))
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "fields",
    [
        {**THINKING, "temperature": 1, "top_p": 0.95},
        {**THINKING, "tools": [TOOL], "tool_choice": {"type": "auto"}},
        {**THINKING, "tools": [TOOL], "tool_choice": {"type": "none"}},
        {
            "model": "claude-opus-4-6",  # adaptive thinking came with Opus 4.6
            "thinking": {"type": "adaptive"},
            "tools": [TOOL],
            "tool_choice": {"type": "any"},
        },
        {"thinking": {"type": "disabled"}, "temperature": 0.2, "top_k": 5},
        {"temperature": 0, "tools": [TOOL], "tool_choice": {"type": "any"}},
        {"model": "claude-opus-4-7", "thinking": {"type": "adaptive"}},
        {
            "tools": [TOOL],
            "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True},
        },
    ],
)
def test_what_the_api_accepts_passes(fields: dict[str, Any]) -> None:
    assert anthropic_problems(body(**fields)) == []


def test_a_tool_use_id_used_again_in_the_request_is_refused() -> None:
    use = {"type": "tool_use", "id": "call_0", "name": "f", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "call_0", "content": "ok"}
    turn = [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]
    twice = body(tools=[TOOL], messages=[*ASK, *turn, *turn])
    assert anthropic_problems(twice) == ["messages.3.content.0: `tool_use` ids must be unique"]
    assert anthropic_problems(body(tools=[TOOL], messages=[*ASK, *turn])) == []


def canonical(**fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("hi")],
        max_output_tokens=4096,
        tools=[ToolDefinition(name="f")],
        **fields,
    )


def test_disable_parallel_tool_use_is_never_sent_with_tool_choice_none() -> None:
    call = make_call(model="anthropic:claude-sonnet-4-5")
    none = encode(canonical(tool_choice=ToolChoice.none(), parallel_tool_calls=False), call)
    assert none["tool_choice"] == {"type": "none"}
    auto = encode(canonical(tool_choice=ToolChoice.auto(), parallel_tool_calls=False), call)
    assert auto["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert anthropic_problems(none) == [] and anthropic_problems(auto) == []


def test_a_model_that_thinks_only_adaptively_is_sent_adaptive_thinking() -> None:
    request = canonical(thinking=ThinkingConfig(budget_tokens=2048))
    sent = encode(request, make_call(model="anthropic:claude-opus-4-7"))
    assert (
        sent["thinking"] == {"type": "adaptive", "display": "summarized"}
        and anthropic_problems(sent) == []
    )
    older = encode(request, make_call(model="anthropic:claude-sonnet-4-5"))
    assert older["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_the_per_model_lookup_can_be_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    assert builtin_model_traits("claude-opus-4-7-20260416").sampling is False
    assert builtin_model_traits("claude-haiku-4-5") == ModelTraits()
    catalog = {"claude-next": ModelTraits(sampling=False)}
    monkeypatch.setattr(
        anthropic_rules, "model_traits", lambda m: catalog.get(m, anthropic_rules.DEFAULT_TRAITS)
    )
    assert anthropic_problems(body(model="claude-next", temperature=0.3)) != []
    assert anthropic_problems(body(model="claude-opus-4-7", temperature=0.3)) == []


@pytest.mark.anyio
async def test_thinking_with_a_forced_tool_fails_before_any_request(emulator: Emulator) -> None:
    adapter = build_adapter(
        "anthropic", AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"))
    )
    request = canonical(thinking=ThinkingConfig(budget_tokens=2048), tool_choice=ToolChoice.any())
    with pytest.raises(InvalidRequestError, match="forces tool use"):
        await adapter.complete(request)
    assert emulator.stats.requests == 0
    await adapter.aclose()


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"tools": [TOOL], "tool_choice": {"type": "none", "disable_parallel_tool_use": True}},
            "Extra inputs are not permitted",
        ),
        ({**THINKING, "top_k": 5}, "top_k"),
        ({**THINKING, "tools": [TOOL], "tool_choice": {"type": "any"}}, "forces tool use"),
    ],
)
def test_the_emulator_refuses_the_same(
    emulator: Emulator, fields: dict[str, Any], expected: str
) -> None:
    reply = httpx.post(
        emulator.base_url("anthropic") + "/v1/messages",
        json=body(**fields),
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    assert reply.status_code == 400 and expected in reply.text, reply.text


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"temperature": 0.2}, "`temperature` is deprecated for this model"),
        ({"top_k": 5}, "`top_k` is deprecated for this model"),
        (THINKING, "'enabled' is not supported for this model"),
    ],
)
def test_the_emulator_knows_a_model_without_sampling_or_manual_thinking(
    emulator: Emulator, fields: dict[str, Any], expected: str
) -> None:
    reply = httpx.post(
        emulator.base_url("anthropic") + "/v1/messages",
        json=body(model="claude-opus-4-7", **fields),
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    assert reply.status_code == 400 and expected in reply.text, reply.text
    assert anthropic_problems(body(model="claude-opus-4-7", **fields)) != []


@pytest.mark.anyio
async def test_thinking_on_an_adaptive_only_model_is_accepted(emulator: Emulator) -> None:
    adapter = build_adapter(
        "anthropic", AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"))
    )
    request = canonical(thinking=ThinkingConfig(budget_tokens=2048)).model_copy(
        update={"model": "anthropic:claude-opus-4-7"}
    )
    response = await adapter.complete(request)
    assert emulator.requests[-1].json()["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert response.content
    await adapter.aclose()


def test_per_model_traits_come_from_the_catalog() -> None:
    from metis.catalog import default_catalog
    from metis.wire.anthropic.rules import catalog_model_traits, parameter_problems

    assert catalog_model_traits("claude-sonnet-4-5").thinking_modes == {"enabled"}  # a budget
    assert "adaptive" in catalog_model_traits("claude-opus-4-6").thinking_modes
    try:
        default_catalog().override("anthropic", "claude-test-nosampling", {"temperature": False})
        body = {"model": "claude-test-nosampling", "max_tokens": 100, "temperature": 0.5}
        assert any("temperature" in p for p in parameter_problems(body))
        assert catalog_model_traits("claude-test-nosampling").sampling is False
    finally:
        default_catalog.cache_clear()


def test_traits_read_once_follow_a_changed_catalog_entry() -> None:
    from metis.catalog import default_catalog
    from metis.wire.anthropic.rules import catalog_model_traits

    try:
        assert catalog_model_traits("claude-sonnet-4-5").sampling is True  # read, and kept
        default_catalog().override("anthropic", "claude-sonnet-4-5", {"temperature": False})
        assert catalog_model_traits("claude-sonnet-4-5").sampling is False  # a new entry
    finally:
        default_catalog.cache_clear()
    assert catalog_model_traits("claude-sonnet-4-5").sampling is True  # the catalog reread
