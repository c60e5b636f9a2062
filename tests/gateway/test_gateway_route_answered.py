"""Which model of a route answered, and what each failed attempt was: the ``x-metis-model``
header on every answer to a route (streamed and not, passed through or translated), each
failed attempt counted by model and error class in ``/metrics``, and a route whose every model
failed naming each one in its error message (docs/gateway.md "Routes")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

ROUTES = {"gpt-first": {"models": ["gpt", "flash"]}}
AUTH = {"authorization": f"Bearer {GATEWAY_KEY}", "anthropic-version": "2023-06-01"}
CHAT = {"model": "gpt-first", "messages": [{"role": "user", "content": "Hi"}]}
MESSAGES = {**CHAT, "max_tokens": 50}


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    yield Emulator()


@pytest.fixture
def url(emulator: Emulator) -> Iterator[str]:
    with serving(create_app(gateway_config(emulator, routes=ROUTES))) as (url, _):
        yield url


def _post(url: str, path: str, body: dict[str, Any], streamed: bool) -> httpx.Response:
    sent = {**body, "stream": True} if streamed else body
    answer = httpx.post(url + path, json=sent, headers=AUTH)
    answer.read()
    return answer


# the chat API passes gpt-4o through and translates for flash; Messages translates for both
WAYS = [("/v1/chat/completions", CHAT), ("/v1/messages", MESSAGES)]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(("path", "body"), WAYS)
def test_the_model_that_answered_a_route_is_named(
    url: str, emulator: Emulator, path: str, body: dict[str, Any], streamed: bool
) -> None:
    first = _post(url, path, body, streamed)
    assert first.status_code == 200 and first.headers["x-metis-model"] == "openai:gpt-4o"
    emulator.push_fault("overloaded", provider="openai")
    fell = _post(url, path, body, streamed)
    assert fell.status_code == 200
    assert fell.headers["x-metis-model"] == "gemini:gemini-2.5-flash"
    assert emulator.requests[-1].provider == "gemini"


def test_a_model_named_alone_has_no_model_header(url: str) -> None:
    answer = _post(url, "/v1/chat/completions", {**CHAT, "model": "gpt"}, False)
    assert answer.status_code == 200 and "x-metis-model" not in answer.headers


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(("path", "body"), WAYS)
def test_each_failed_attempt_is_counted_by_model_and_class(
    url: str, emulator: Emulator, path: str, body: dict[str, Any], streamed: bool
) -> None:
    emulator.push_fault("overloaded", provider="openai")
    assert _post(url, path, body, streamed).status_code == 200
    scraped = httpx.get(url + "/metrics").text
    counted = 'metis_gateway_failed_attempts_total{model="openai:gpt-4o",error_class="overloaded"}'
    assert f"{counted} 1\n" in scraped
    failed = [line for line in scraped.splitlines() if line.startswith(counted[:35])]
    assert failed == [f"{counted} 1"]  # the model that answered failed nothing


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(("path", "body"), WAYS)
def test_a_route_whose_every_model_failed_names_each(
    url: str, emulator: Emulator, path: str, body: dict[str, Any], streamed: bool
) -> None:
    emulator.push_fault("overloaded", provider="openai")
    emulator.push_fault("rate_limit", provider="gemini")
    answer = _post(url, path, body, streamed)
    assert answer.status_code == 429  # the last model's class, as the taxonomy gives it
    error = answer.json()["error"]
    assert "openai:gpt-4o (overloaded)" in error["message"]
    assert "gemini:gemini-2.5-flash (rate_limit)" in error["message"]
    scraped = httpx.get(url + "/metrics").text
    assert 'model="gemini:gemini-2.5-flash",error_class="rate_limit"} 1' in scraped
