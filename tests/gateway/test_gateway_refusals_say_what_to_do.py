"""A refusal a developer's client gets from the gateway says what to do about it: a key not
sent, a key that is not one of the gateway's (a provider's key, most often), and a spent
budget, which no retry mends, each in words the developer can act on."""

from __future__ import annotations

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}
SPENT = {"name": "mobile", "sha256": digest("team-key"), "budget_usd": 0}


def _client(emulator: Emulator) -> httpx.AsyncClient:
    app = create_app(gateway_config(emulator, {"keys": [SPENT]}))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


async def test_a_key_not_sent_and_a_key_not_the_gateways_are_told_apart() -> None:
    async with _client(Emulator()) as client:
        missing = await client.post("/v1/chat/completions", json=SAID)
        wrong = await client.post(
            "/v1/messages", json=SAID, headers={"x-api-key": "sk-ant-api03-provider"}
        )
        served = await client.post("/v1/messages", json=SAID, headers={"x-api-key": GATEWAY_KEY})
    assert (missing.status_code, wrong.status_code, served.status_code) == (401, 401, 200)
    assert missing.json()["error"]["message"] == (
        "no API key was sent: send this gateway's key as x-api-key or Authorization: Bearer"
    )
    assert wrong.json()["error"]["message"] == (
        "the API key sent is not a key of this gateway (a provider's own key is not one): "
        "send the key this gateway's operator gave you"
    )


async def test_a_spent_budget_says_no_retry_mends_it_and_who_can() -> None:
    async with _client(Emulator()) as client:
        refused = await client.post("/v1/messages", json=SAID, headers={"x-api-key": "team-key"})
    assert refused.status_code == 429 and refused.headers["x-should-retry"] == "false"
    assert refused.json()["error"]["message"] == (
        "key 'mobile' has spent its budget of 0 USD: retrying will not help; the gateway's "
        "operator raises the key's budget_usd or resets its spend"
    )
