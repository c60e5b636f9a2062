"""``POST /v1/responses/input_tokens`` through the official openai SDK
(``responses.input_tokens.count``): the body read as a Responses request, counted the way
Anthropic's ``count_tokens`` is (the provider's count where it has one, else the estimate),
for a model passed through and for translated ones, a stored conversation counted with
``previous_response_id``; and what it refuses, in OpenAI's error shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_config

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
pytestmark = pytest.mark.anyio

SAID = "What is the weather like in Paris this afternoon?"
LONGER = SAID + " And tomorrow, and the day after, in Lyon, Nice and Bordeaux too?"
ITEMS = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": SAID}]}]
"""SAID as the items metis writes it in: the emulator counts the items' JSON, so a string
input counts other than the same words as items."""
KEYS = [{"name": "narrow", "sha256": digest("narrow-key"), "models": ["flash"]}]


@asynccontextmanager
async def _client(key: str = GATEWAY_KEY, **settings: Any) -> AsyncIterator[Any]:
    """The openai SDK's client of a gateway (emulator-backed) in process (its ``http``: a
    plain client of it)."""
    app = create_app(gateway_config(Emulator(), settings or None))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as h:
        sdk = openai.AsyncOpenAI(api_key=key, base_url="http://gw/v1", http_client=h, max_retries=0)
        sdk.http = h
        yield sdk


@pytest.mark.parametrize("model", ["gpt5", "flash", "sonnet", "gpt"])
async def test_the_count_is_the_input_a_response_is_made_from(model: str) -> None:
    """gpt5 is passed through for a response; flash and sonnet are translated; gpt (Chat
    Completions) has no counting endpoint and is estimated. Each count grows with the input
    and the instructions and tools are counted too."""
    async with _client() as sdk:
        short = await sdk.responses.input_tokens.count(model=model, input=ITEMS)
        longer = await sdk.responses.input_tokens.count(model=model, input=LONGER)
        more = await sdk.responses.input_tokens.count(
            model=model,
            input=SAID,
            instructions="Answer in French, briefly, as a forecaster would.",
            tools=[{"type": "function", **WEATHER_FUNCTION}],
        )
        made = await sdk.responses.create(model=model, input=ITEMS)
    assert short.object == "response.input_tokens"
    assert 0 < short.input_tokens < longer.input_tokens
    assert short.input_tokens < more.input_tokens
    if model != "gpt":  # the provider's own count: what the call then reports using
        assert short.input_tokens == made.usage.input_tokens


@pytest.mark.parametrize("model", ["gpt5", "flash"])
async def test_a_previous_response_counts_the_conversation_it_continues(model: str) -> None:
    async with _client() as sdk:
        first = await sdk.responses.create(model=model, input=LONGER)
        alone = await sdk.responses.input_tokens.count(model=model, input=SAID)
        continued = await sdk.responses.input_tokens.count(
            model=model, input=SAID, previous_response_id=first.id
        )
        with pytest.raises(openai.BadRequestError) as caught:  # as OpenAI answers it
            await sdk.responses.input_tokens.count(
                model=model, input=SAID, previous_response_id="resp_none"
            )
    assert continued.input_tokens > alone.input_tokens + first.usage.input_tokens // 2
    assert "resp_none" in caught.value.response.json()["error"]["message"]


async def test_a_bad_body_is_a_400_in_openais_shape() -> None:
    async with _client() as sdk:
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.responses.input_tokens.count(model="flash", input=42)  # type: ignore[arg-type]
        headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
        no_json = await sdk.http.post("/v1/responses/input_tokens", content=b"{no", headers=headers)
    error = caught.value.response.json()["error"]
    assert error["type"] == "invalid_request_error" and "input" in error["message"]
    assert caught.value.response.headers["x-request-id"]
    assert no_json.status_code == 400
    assert no_json.json()["error"]["type"] == "invalid_request_error"


async def test_an_unknown_model_is_a_404_and_a_key_keeps_to_its_models() -> None:
    async with _client() as sdk:
        with pytest.raises(openai.NotFoundError) as unknown:
            await sdk.responses.input_tokens.count(model="gpt-9-turbo", input=SAID)
    assert unknown.value.code == "model_not_found"
    assert "gpt-9-turbo" in unknown.value.response.json()["error"]["message"]
    async with _client("narrow-key", keys=KEYS) as sdk:
        allowed = await sdk.responses.input_tokens.count(model="flash", input=SAID)
        with pytest.raises(openai.PermissionDeniedError) as refused:
            await sdk.responses.input_tokens.count(model="gpt5", input=SAID)
    assert allowed.input_tokens > 0
    assert refused.value.status_code == 403 and refused.value.code == "model_not_allowed"
    async with _client("not-a-key") as sdk:
        with pytest.raises(openai.AuthenticationError):
            await sdk.responses.input_tokens.count(model="flash", input=SAID)


async def test_the_path_is_not_taken_for_a_stored_responses_id() -> None:
    """A POST to it was a 405 (the ``/v1/responses/{id}`` routes matched it); a GET still
    asks for a stored response of that id."""
    async with _client() as sdk:
        counted = await sdk.post(
            "/responses/input_tokens",
            body={"model": "flash", "input": SAID},
            cast_to=httpx.Response,
        )
        with pytest.raises(openai.NotFoundError):
            await sdk.responses.retrieve("input_tokens")
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


async def test_what_the_reader_leaves_out_is_named_as_for_a_response() -> None:
    async with _client() as sdk:
        raw = await sdk.responses.input_tokens.with_raw_response.count(
            model="flash", input=SAID, truncation="auto"
        )
        plain = await sdk.responses.input_tokens.with_raw_response.count(model="flash", input=SAID)
    assert "truncation" in raw.headers["x-metis-dropped"]
    assert "x-metis-dropped" not in plain.headers
    assert raw.parse().input_tokens == plain.parse().input_tokens
    assert raw.headers["x-request-id"]
