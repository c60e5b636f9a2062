"""A route with a model of the caller's API: the router chooses the model of each attempt (its
limits, its availability, the fallback) and the gateway passes the request through to a model
of the caller's API and translates it for any other, within one request. The official SDKs
against the gateway, the emulator upstream."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")

SAID = [{"role": "user", "content": "Hi"}]
KEYS = [
    {"name": "paying", "sha256": digest("paying-key"), "budget_usd": 100},
    {"name": "one", "sha256": digest("one-key"), "max_concurrent": 1},
]
ROUTES = {
    "gpt-first": {"models": ["gpt", "flash"]},
    "flash-first": {"models": ["flash", "gpt"]},
    "sonnet-first": {"models": ["sonnet", "gpt"]},
    "gpt5-first": {"models": ["gpt5", "sonnet"]},
    "limited": {
        "models": ["gpt", "flash"],
        "limits": {"openai:gpt-4o": {"requests_per_minute": 1, "on_limit": "fail"}},
    },
    "tuned": {"models": [{"model": "gpt", "options": {"temperature": 0.2}}]},
}


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    yield Emulator()


@pytest.fixture
def served(emulator: Emulator) -> Iterator[tuple[str, Any]]:
    app = create_app(gateway_config(emulator, {"keys": KEYS}, routes=ROUTES))
    with serving(app) as (url, _):
        yield url, app


@pytest.fixture
def oai(served: tuple[str, Any]) -> Any:
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=served[0] + "/v1", max_retries=0)


def _chat(oai: Any, model: str, streamed: bool) -> tuple[str, str, str]:
    """The path, the model the answer names, and its text."""
    if not streamed:
        raw = oai.chat.completions.with_raw_response.create(model=model, messages=SAID, seed=7)
        completion = raw.parse()
        return raw.headers["x-metis-path"], completion.model, completion.choices[0].message.content
    with oai.chat.completions.with_streaming_response.create(
        model=model, messages=SAID, seed=7, stream=True
    ) as raw:
        path = raw.headers["x-metis-path"]
        chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return path, chunks[0].model, text


@pytest.mark.parametrize("streamed", [False, True])
def test_a_routes_model_of_the_callers_api_is_passed_through(
    oai: Any, emulator: Emulator, streamed: bool
) -> None:
    assert _chat(oai, "gpt-first", streamed) == ("pass-through", "gpt-first", "You said: Hi")
    assert emulator.bodies("openai")[-1]["seed"] == 7  # as the client wrote it
    # a route whose first model is of another API translates, as before
    assert _chat(oai, "flash-first", streamed)[0] == "translated"


@pytest.mark.parametrize("streamed", [False, True])
def test_a_failed_pass_through_falls_back_to_a_translated_model_and_cools_down(
    oai: Any, emulator: Emulator, streamed: bool
) -> None:
    emulator.push_fault("overloaded", provider="openai")
    assert _chat(oai, "gpt-first", streamed) == ("translated", "gpt-first", "You said: Hi")
    assert emulator.requests[-2].provider == "openai"  # tried, refused
    assert emulator.requests[-1].provider == "gemini"
    # the model that failed cools down: the next request goes to the other at once
    assert _chat(oai, "gpt-first", streamed)[0] == "translated"
    assert emulator.requests[-1].provider == "gemini"


@pytest.mark.parametrize("streamed", [False, True])
def test_a_failed_translated_model_falls_back_to_a_pass_through(
    oai: Any, emulator: Emulator, streamed: bool
) -> None:
    emulator.push_fault("overloaded", provider="gemini")
    assert _chat(oai, "flash-first", streamed) == ("pass-through", "flash-first", "You said: Hi")
    assert emulator.bodies("openai")[-1]["seed"] == 7


def test_anthropic_and_responses_routes_fall_over_to_another_api(
    served: tuple[str, Any], oai: Any, emulator: Emulator
) -> None:
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=served[0], max_retries=0)
    said = {"model": "sonnet-first", "max_tokens": 50, "messages": SAID}
    raw = claude.messages.with_raw_response.create(**said, extra_body={"top_k": 3})
    assert raw.headers["x-metis-path"] == "pass-through" and raw.parse().model == "sonnet-first"
    assert emulator.bodies("anthropic")[-1]["top_k"] == 3
    emulator.push_fault("overloaded", provider="anthropic")
    with claude.messages.stream(**said) as stream:
        assert stream.get_final_text() == "You said: Hi"
    assert emulator.requests[-1].provider == "openai"
    first = oai.responses.with_raw_response.create(model="gpt5-first", input="I am Ada.")
    assert first.headers["x-metis-path"] == "pass-through"
    emulator.push_fault("overloaded", provider="openai_responses")
    with oai.responses.stream(
        model="gpt5-first", previous_response_id=first.parse().id, input="Who?"
    ) as stream:
        final = stream.get_final_response()
    assert final.output_text == "You said: Who?" and final.model == "gpt5-first"
    assert emulator.requests[-1].provider == "anthropic"  # the conversation, translated
    assert "I am Ada." in str(emulator.bodies("anthropic")[-1]["messages"])


def test_a_routes_limits_and_the_keys_budget_hold_for_a_pass_through(
    served: tuple[str, Any], emulator: Emulator
) -> None:
    url, app = served
    paying = openai.OpenAI(api_key="paying-key", base_url=url + "/v1", max_retries=0)
    first = paying.chat.completions.with_raw_response.create(model="limited", messages=SAID)
    assert first.headers["x-metis-path"] == "pass-through"
    found = app.state.gateway.keys.find("paying-key")
    assert found is not None and found.spent > 0  # charged the usage the provider reported
    # one request a minute to gpt-4o: the next goes to the route's other model
    second = paying.chat.completions.with_raw_response.create(model="limited", messages=SAID)
    assert second.headers["x-metis-path"] == "translated"
    assert emulator.requests[-1].provider == "gemini"


def test_a_model_the_route_gives_options_is_translated(oai: Any, emulator: Emulator) -> None:
    assert _chat(oai, "tuned", False)[0] == "translated"
    assert emulator.bodies("openai")[-1]["temperature"] == 0.2


def test_every_model_failing_is_the_last_error_in_the_callers_shape(
    oai: Any, emulator: Emulator
) -> None:
    emulator.push_fault("overloaded", provider="openai")
    emulator.push_fault("overloaded", provider="gemini")
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(model="gpt-first", messages=SAID, stream=True)


@pytest.mark.parametrize("model", ["gpt-first", "flash-first"])
def test_a_client_gone_from_a_routed_stream_frees_the_keys_place(
    served: tuple[str, Any], emulator: Emulator, model: str
) -> None:
    url, _ = served
    emulator.push_fault("stall=60")
    said = {"model": model, "messages": SAID, "stream": True}
    headers = {"authorization": "Bearer one-key"}
    with httpx.stream("POST", url + "/v1/chat/completions", json=said, headers=headers) as held:
        assert held.status_code == 200
        next(held.iter_bytes())
    statuses = []
    for _ in range(200):  # the gateway notices the disconnect at once; a bound, not a timing
        again = {"model": "gpt", "messages": SAID}
        answer = httpx.post(url + "/v1/chat/completions", json=again, headers=headers)
        statuses.append(answer.status_code)
        if statuses[-1] != 429:
            break
        time.sleep(0.05)
    assert statuses[-1] == 200, statuses
