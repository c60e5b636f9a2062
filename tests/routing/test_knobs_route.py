"""One request across a route of Anthropic, OpenAI, Gemini and Bedrock asking for effort high,
top_p, a seed and caching, with each provider's own options: every request the route sends is
one its provider takes (the emulator refuses any other), and every setting not applied is in
that call's warnings (docs/contract.md §9)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis import AdapterConfig, Router, build_adapter
from metis.adapter import Adapter
from metis.errors import InvalidRequestError
from metis.model import CacheHint, CachePolicy, CanonicalRequest, Message, TextBlock
from metis.routing import RouteTarget
from metis.testing.emulator import Emulator

from ..helpers import answer

pytestmark = pytest.mark.backend_independent  # the requests each provider is sent

TARGETS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-5.1",
    "gemini": "gemini:gemini-2.5-flash",
    "bedrock": "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
}
NOT_APPLIED = {  # what each provider (and model) does not take of the request's settings
    "anthropic": {"top_p", "seed"},  # top_p under 0.95 with thinking on; no seed in Messages
    "openai": {"top_p"},  # gpt-5.1 takes top_p only with reasoning off
    "gemini": set(),
    "bedrock": {"top_p", "seed"},  # Claude's rules; Converse has no seed
}
OPTIONS = {
    "anthropic": {"service_tier": "auto"},
    "openai": {"service_tier": "flex"},
    "google": {"generationConfig": {"candidateCount": 1}},
}


def adapters(emulator: Emulator) -> dict[str, Adapter]:
    return {
        name: build_adapter(
            name,
            AdapterConfig(
                api_key="k",
                base_url=emulator.base_url(name),
                http_client=emulator.client(),  # in process: no sockets (tests/transport's)
                max_retries=0,
            ),
        )
        for name in TARGETS
    }


def routed(emulator: Emulator, first: str) -> Router:
    order = [first, *(name for name in TARGETS if name != first)]
    return Router(
        [RouteTarget(TARGETS[name]) for name in order],
        name="knobs",
        adapters=adapters(emulator),
    )


def ask(**fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model="route:knobs",
        messages=[Message.user("Plan a trip.")],
        max_output_tokens=20000,
        thinking="high",
        top_p=0.9,
        seed=42,
        provider_options=OPTIONS,
        extra_headers={"anthropic": {"anthropic-beta": "knobs-test"}},
        extra_query={"gemini": {"trace": "on"}},
        **fields,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("first", list(TARGETS))
async def test_each_provider_of_the_route_gets_a_request_it_takes(
    emulator: Emulator, first: str, stream: bool
) -> None:
    response = await answer(routed(emulator, first), ask(), stream)
    assert {w.block_type for w in response.warnings} == NOT_APPLIED[first]
    (recorded,) = emulator.requests
    assert recorded.status == 200
    body = recorded.json()
    if first == "anthropic":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
        assert body["service_tier"] == "auto" and "top_p" not in body
        assert recorded.headers["anthropic-beta"] == "knobs-test"
    elif first == "openai":
        assert body["reasoning_effort"] == "high" and body["seed"] == 42
        assert body["service_tier"] == "flex" and "top_p" not in body
        assert "anthropic-beta" not in recorded.headers
    elif first == "gemini":
        config = body["generationConfig"]
        assert config["thinkingConfig"]["thinkingBudget"] == 16384
        assert (config["topP"], config["seed"], config["candidateCount"]) == (0.9, 42, 1)
        assert recorded.query["trace"] == "on"
    else:
        fields = body["additionalModelRequestFields"]
        assert fields["thinking"] == {"type": "enabled", "budget_tokens": 16384}
        assert "topP" not in body["inferenceConfig"] and "service_tier" not in body


CACHED_NOT_APPLIED = {  # and the caller's cache hint, which OpenAI and Gemini have no form for
    "anthropic": {"top_p", "seed"},
    "openai": {"top_p", "cache"},
    "gemini": {"cache"},
    "bedrock": {"top_p", "seed"},
}


def ask_cached() -> CanonicalRequest:
    """The route's request continuing a conversation, with a cache policy (a one-hour TTL
    and OpenAI's key) and the caller's hint on the manual."""
    manual = TextBlock(text="The manual. " * 300, cache=CacheHint(ttl="1h"))
    return ask(
        system_prompt="Plan from the manual.", cache=CachePolicy(ttl="1h", key="trip-42")
    ).model_copy(
        update={
            "messages": [
                Message.user(manual, "Plan a trip."),
                Message.assistant("Where to?"),
                Message.user("Lisbon."),
            ]
        }
    )


def anthropic_marks(body: dict[str, Any]) -> list[Any]:
    blocks = [*body["system"], *(b for m in body["messages"] for b in m["content"])]
    return [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("first", list(TARGETS))
async def test_effort_sampling_seed_and_caching_across_the_route(
    emulator: Emulator, first: str, stream: bool
) -> None:
    response = await answer(routed(emulator, first), ask_cached(), stream)
    assert {w.block_type for w in response.warnings} == CACHED_NOT_APPLIED[first]
    (recorded,) = emulator.requests
    assert recorded.status == 200
    body = recorded.json()
    hour = {"type": "ephemeral", "ttl": "1h"}
    if first == "anthropic":  # the hint, the system prompt, the conversation's end
        assert anthropic_marks(body) == [hour, hour, hour]
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    elif first == "openai":
        assert body["prompt_cache_key"] == "trip-42" and body["reasoning_effort"] == "high"
        assert body["seed"] == 42
    elif first == "gemini":
        assert "cachedContent" not in body and "cache_control" not in json.dumps(body)
        assert body["generationConfig"]["seed"] == 42
    else:
        points = [
            b["cachePoint"]
            for section in (body["system"], *(m["content"] for m in body["messages"]))
            for b in section
            if "cachePoint" in b
        ]
        assert points == [{"type": "default", "ttl": "1h"}] * 3
        assert body["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 16384


@pytest.mark.anyio
async def test_a_fallback_sends_each_provider_its_own_fitted_request(emulator: Emulator) -> None:
    for provider in ("anthropic", "openai", "gemini"):
        emulator.push_fault("overloaded", provider=provider)
    response = await routed(emulator, "anthropic").complete(ask())
    assert [r.provider for r in emulator.requests] == ["anthropic", "openai", "gemini", "bedrock"]
    assert {w.block_type for w in response.warnings} == NOT_APPLIED["bedrock"]
    bodies = [r.json() for r in emulator.requests]
    assert bodies[1]["reasoning_effort"] == "high" and "thinking" not in bodies[1]
    assert "reasoning_effort" not in bodies[3] and "service_tier" not in bodies[3]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("provider_options", {"openai": {"model": "gpt-4o"}}, "'model' is set by metis"),
        ("provider_options", {"openai": {"stream": True}}, "'stream' is set by metis"),
        ("provider_options", {"openai": {"messages": []}}, "'messages' is set by metis"),
        ("extra_headers", {"openai": {"Authorization": "Bearer x"}}, "'Authorization'"),
        ("extra_query", {"gemini": {"alt": "json"}}, "'alt' is set by metis"),
    ],
)
async def test_an_option_overriding_what_metis_sets_is_refused(
    emulator: Emulator, field: str, value: Any, named: str
) -> None:
    provider = next(iter(value))
    adapter = adapters(emulator)[provider]
    request = CanonicalRequest(
        model=TARGETS[provider], messages=[Message.user("hi")], max_output_tokens=100,
        **{field: value},
    )  # fmt: skip
    with pytest.raises(InvalidRequestError, match=named):
        await adapter.complete(request)
    assert emulator.requests == []


@pytest.mark.anyio
async def test_options_reach_a_provider_by_the_stacks_it_extends(emulator: Emulator) -> None:
    adapter = build_adapter(
        "azure",
        AdapterConfig(api_key="k", base_url=emulator.base_url("azure"), settings={"resource": "r"}),
    )
    request = CanonicalRequest(
        model="azure:gpt-4o",
        messages=[Message.user("hi")],
        max_output_tokens=100,
        provider_options={"openai": {"service_tier": "default"}, "azure": {"user": "u-1"}},
    )
    await adapter.complete(request)
    (body,) = emulator.bodies()
    assert (body["service_tier"], body["user"]) == ("default", "u-1")
