"""The token counts (Anthropic's ``count_tokens``, OpenAI's ``input_tokens``) under a gateway
key's limits, through the official SDKs: each is a request, counted against the key's
request rate and places, and costs nothing (not charged to its budget, nor refused when the
budget is spent)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
anthropic = ImportOnUse("anthropic")
HI = [{"role": "user", "content": "Hi"}]


@contextmanager
def _gateway(**key: Any) -> Iterator[tuple[Any, Any, Any]]:
    """Both SDKs' clients of a gateway with one key ``team`` (``key``: its limits), and the
    gateway's keys."""
    keys = [{"name": "team", "sha256": digest("team-key"), **key}]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    with serving(app) as (url, _):
        oai = openai.OpenAI(api_key="team-key", base_url=f"{url}/v1", max_retries=0)
        claude = anthropic.Anthropic(api_key="team-key", base_url=url, max_retries=0)
        yield oai, claude, app.state.gateway.keys


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_a_count_is_a_request_of_the_keys_rate(api: str) -> None:
    with _gateway(requests_per_minute=2) as (oai, claude, _):

        def count() -> int:
            if api == "anthropic":
                return claude.messages.count_tokens(model="sonnet", messages=HI).input_tokens
            return oai.responses.input_tokens.count(model="gpt5", input="Hi").input_tokens

        assert count() > 0 and count() > 0
        refused = anthropic.RateLimitError if api == "anthropic" else openai.RateLimitError
        with pytest.raises(refused) as caught:
            count()
    assert "2 requests per minute" in str(caught.value)
    assert int(caught.value.response.headers["retry-after"]) >= 1


@pytest.mark.anyio
async def test_a_count_costs_nothing_and_a_spent_budget_still_counts() -> None:
    with _gateway(budget_usd="0.000001") as (oai, claude, keys):
        claude.messages.create(model="sonnet", max_tokens=20, messages=HI)  # spends it all
        spent = await keys.spent("team")
        assert claude.messages.count_tokens(model="sonnet", messages=HI).input_tokens > 0
        assert oai.responses.input_tokens.count(model="flash", input="Hi").input_tokens > 0
        assert await keys.spent("team") == spent
        with pytest.raises(anthropic.RateLimitError, match="spent its budget"):
            claude.messages.create(model="sonnet", max_tokens=20, messages=HI)


@pytest.mark.anyio
async def test_a_count_holds_one_of_the_keys_places_while_it_runs() -> None:
    """max_concurrent 1: while another request of the key's is in flight a count is refused
    (429); counts one after another are each admitted (the place is given back), as are messages
    after them."""
    with _gateway(max_concurrent=1) as (oai, claude, keys):
        team = keys.find("team-key")
        await keys.admit(team, "sonnet")  # a request of the key's in flight
        with pytest.raises(anthropic.RateLimitError, match="in flight"):
            claude.messages.count_tokens(model="sonnet", messages=HI)
        with pytest.raises(openai.RateLimitError, match="in flight"):
            oai.responses.input_tokens.count(model="gpt5", input="Hi")
        await keys.release(team, None, None)
        for _ in range(3):
            assert claude.messages.count_tokens(model="sonnet", messages=HI).input_tokens > 0
            assert oai.responses.input_tokens.count(model="gpt5", input="Hi").input_tokens > 0
        assert claude.messages.create(model="sonnet", max_tokens=20, messages=HI).content


COUNTED_AT = {"anthropic": "/v1/messages/count_tokens", "responses": "/v1/responses/input_tokens"}


def _count(api: str, **gateway: Any) -> tuple[Any, Any]:
    """A count through the SDK of ``api`` (sonnet: an Anthropic model; gpt5: a Responses
    one), and the body the provider was asked to count."""
    emulator = Emulator()
    with serving(create_app(gateway_config(emulator, gateway or None))) as (url, _):
        if api == "anthropic":
            claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
            raw = claude.messages.with_raw_response.count_tokens(
                model="sonnet", system="Be brief.", messages=HI
            )
        else:
            oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)
            raw = oai.responses.input_tokens.with_raw_response.count(
                model="gpt5", instructions="Be brief.", input="Hi"
            )
    sent = [r for r in emulator.requests if r.path == COUNTED_AT[api]]
    assert len(sent) == 1
    return raw, json.loads(sent[0].body)


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_a_count_in_the_models_own_api_is_the_providers_count_of_the_clients_body(
    api: str,
) -> None:
    raw, sent = _count(api)
    assert raw.headers["x-metis-path"] == "pass-through"
    if api == "anthropic":
        assert sent == {"model": "claude-sonnet-4-5", "system": "Be brief.", "messages": HI}
    else:  # the string input as it came, not written as items
        assert sent == {"model": "gpt-5", "instructions": "Be brief.", "input": "Hi"}
    assert raw.parse().input_tokens > 0
    translated, sent_translated = _count(api, pass_through=False)
    assert "x-metis-path" not in translated.headers
    assert sent_translated != sent  # metis's own writing of the request


def test_a_providers_count_without_input_tokens_is_an_error_that_says_so() -> None:
    """A passed-through count whose provider answers no ``input_tokens`` is a classified
    error naming the provider, never a count the client cannot read."""
    answered = httpx.MockTransport(lambda request: httpx.Response(200, json={"tokens": 3}))
    adapter = {"type": "anthropic", "api_key_env": "UP_KEY", "max_retries": 0}
    data = {
        "adapters": {"claude": adapter},
        "models": {"anthropic:claude-sonnet-4-5": {"adapter": "claude", "aliases": ["sonnet"]}},
        "gateway": {"api_key_env": "GATEWAY_KEY"},
    }
    environ = {"UP_KEY": "k", "GATEWAY_KEY": GATEWAY_KEY}
    clients = {"claude": httpx.AsyncClient(transport=answered)}
    config = GatewayConfig.from_dict(data, environ=environ, clients=clients)
    with serving(create_app(config)) as (url, _):
        claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        with pytest.raises(anthropic.InternalServerError) as failed:
            claude.messages.count_tokens(model="sonnet", messages=HI)
    assert "answered a token count without input_tokens" in failed.value.message
