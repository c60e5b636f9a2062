"""``parallel_tool_calls``: the canonical request had the field, and the one-line calls and a
Session did not take it (a LiteLLM port's ``parallel_tool_calls=False`` was told to put it in
provider_options, for OpenAI only). Given, it reaches each provider's wire in its own form."""

from __future__ import annotations

from typing import Any

import pytest

import metis
from metis.testing.emulator import Emulator


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18 C in {city}"


WIRES = [
    ("openai:gpt-4o", "openai", lambda body: body["parallel_tool_calls"]),
    ("openai_responses:gpt-5", "openai", lambda body: body["parallel_tool_calls"]),
    (
        "anthropic:claude-sonnet-4-5",
        "anthropic",
        lambda body: not body["tool_choice"]["disable_parallel_tool_use"],
    ),
]


@pytest.mark.parametrize(("model", "provider", "parallel"), WIRES, ids=[w[0] for w in WIRES])
def test_parallel_tool_calls_false_reaches_the_wire(
    emulator: Emulator, model: str, provider: str, parallel: Any
) -> None:
    options: dict[str, Any] = {"base_url": emulator.base_url(provider), "api_key": "k"}
    metis.complete(model, "Weather?", tools=[get_weather], parallel_tool_calls=False, **options)
    metis.Session(model, tools=[get_weather], parallel_tool_calls=False, **options).send("Hi")
    bodies = [request.json() for request in emulator.requests]
    assert len(bodies) == 2
    assert [parallel(body) for body in bodies] == [False, False]


def test_parallel_tool_calls_not_given_is_the_providers_default(emulator: Emulator) -> None:
    base_url = emulator.base_url("openai")
    metis.complete("openai:gpt-4o", "Weather?", tools=[get_weather], base_url=base_url, api_key="k")
    assert "parallel_tool_calls" not in emulator.requests[0].json()


@pytest.mark.parametrize("value", ["no", 0, 1])
def test_parallel_tool_calls_of_another_type_is_refused_before_sending(
    emulator: Emulator, value: Any
) -> None:
    said = f"parallel_tool_calls: expected True or False, got {type(value).__name__}"
    options: dict[str, Any] = {"base_url": emulator.base_url("openai"), "api_key": "k"}
    with pytest.raises(metis.InvalidRequestError, match=said):
        metis.complete("openai:gpt-4o", "Hi", parallel_tool_calls=value, **options)
    with pytest.raises(metis.InvalidRequestError, match=said):
        metis.Session("openai:gpt-4o", parallel_tool_calls=value, **options)
    assert emulator.stats.requests == 0


def test_a_saved_session_keeps_parallel_tool_calls() -> None:
    session = metis.Session("openai:gpt-4o", parallel_tool_calls=False)
    restored = metis.Session.from_json(session.to_json())
    assert restored.options["parallel_tool_calls"] is False
