"""Gateway keys: kept as digests, each with its models, request rate, requests at once and a
USD budget priced from the catalog."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from metis.errors import ConfigError, RateLimitError
from metis.gateway.app import create_app
from metis.gateway.errors import GatewayPermissionError
from metis.gateway.keys import BudgetExceededError, Keys, KeySpec, digest
from metis.model.response import TokenUsage
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config

SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


def _keys(**spec: Any) -> tuple[Keys, Any]:
    keys = Keys([KeySpec(name="team", sha256=digest("k1"), **spec)], {})
    state = keys.find("k1")
    assert state is not None and keys.find("k2") is None
    return keys, state


def test_a_key_may_name_only_its_models() -> None:
    keys, state = _keys(models=["flash"])
    keys.admit(state, "flash")
    with pytest.raises(GatewayPermissionError, match="may not use model 'gpt'"):
        keys.admit(state, "gpt")


def test_the_request_rate_is_a_sliding_minute() -> None:
    keys, state = _keys(requests_per_minute=2)
    keys.admit(state, "m", now=100.0)
    keys.admit(state, "m", now=110.0)
    with pytest.raises(RateLimitError) as refused:
        keys.admit(state, "m", now=120.0)
    assert refused.value.retry_after_seconds == 40.0
    keys.admit(state, "m", now=160.5)  # the first has left the window


def test_requests_at_once_are_counted_until_released() -> None:
    keys, state = _keys(max_concurrent=1)
    keys.admit(state, "m")
    with pytest.raises(RateLimitError, match="in flight"):
        keys.admit(state, "m")
    keys.release(state, None, None)
    keys.admit(state, "m")


def test_the_budget_is_spent_at_catalog_prices() -> None:
    keys, state = _keys(budget_usd=Decimal("0.001"))
    keys.admit(state, "m")
    keys.release(state, "openai:gpt-4o", TokenUsage(input_tokens=1000, output_tokens=100))
    spent = keys.spent("team")
    assert spent is not None and spent > Decimal("0.001")  # 1000 in, 100 out at gpt-4o's prices
    with pytest.raises(BudgetExceededError, match="spent its budget"):
        keys.admit(state, "m")


def test_a_key_is_given_by_digest_or_variable_never_both() -> None:
    with pytest.raises(ValueError, match="one of the two"):
        KeySpec(name="x", sha256=digest("a"), key_env="A")
    with pytest.raises(ConfigError, match="KEY_A is not set"):
        Keys([KeySpec(name="x", key_env="KEY_A")], {})
    assert Keys([KeySpec(name="x", key_env="KEY_A")], {"KEY_A": "a"}).find("a") is not None


@pytest.mark.anyio
async def test_keys_at_the_gateway() -> None:
    keys = [
        {"name": "narrow", "sha256": digest("narrow-key"), "models": ["flash"]},
        {"name": "spent", "sha256": digest("spent-key"), "budget_usd": 0},
    ]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        ok = await client.post("/v1/messages", json=SAID, headers={"x-api-key": "narrow-key"})
        assert ok.status_code == 200
        other = {**SAID, "model": "gpt"}
        refused = await client.post("/v1/messages", json=other, headers={"x-api-key": "narrow-key"})
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"
        spent = await client.post(
            "/v1/chat/completions", json=SAID, headers={"authorization": "Bearer spent-key"}
        )
        assert spent.status_code == 429 and spent.json()["error"]["code"] == "insufficient_quota"
        assert app.state.gateway.keys.spent("narrow") > 0
