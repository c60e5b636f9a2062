"""Replicas are interchangeable: with gateway.redis_url, a route's availability is shared, so a
model one gateway saw fail is cooling down for every gateway (real redis-server on loopback)."""

from __future__ import annotations

import httpx

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

SAID = {"model": "fallback", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


def test_a_models_cooldown_seen_by_one_gateway_holds_for_the_other(redis_url: str) -> None:
    first_upstream, second_upstream = Emulator(), Emulator()
    settings = {"redis_url": redis_url}
    first = create_app(gateway_config(first_upstream, settings))
    second = create_app(gateway_config(second_upstream, settings))
    headers = {"x-api-key": GATEWAY_KEY}
    with serving(first) as (one, _), serving(second) as (two, _):
        first_upstream.push_fault("overloaded", provider="gemini")
        answer = httpx.post(one + "/v1/messages", json=SAID, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text  # flash failed over to gpt
        assert len(first_upstream.bodies("gemini")) == 1
        answer = httpx.post(two + "/v1/messages", json=SAID, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
    assert second_upstream.bodies("gemini") == []  # cooling down, as the first gateway saw
    assert len(second_upstream.bodies("openai")) == 1
