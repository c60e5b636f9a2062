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
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


def _keys(**spec: Any) -> tuple[Keys, Any]:
    keys = Keys([KeySpec(name="team", sha256=digest("k1"), **spec)], {})
    state = keys.find("k1")
    assert state is not None and keys.find("k2") is None
    return keys, state


async def check_limits(keys: Keys, state: Any) -> None:
    """The limits of a key with models [m], 2 requests a minute, 1 at once, 0.001 USD."""
    with pytest.raises(GatewayPermissionError, match="may not use model 'gpt'"):
        await keys.admit(state, "gpt")
    await keys.admit(state, "m", now=100.0)
    with pytest.raises(RateLimitError, match="in flight"):
        await keys.admit(state, "m", now=101.0)
    await keys.release(state, None, None)
    await keys.admit(state, "m", now=110.0)
    await keys.release(state, None, None)
    with pytest.raises(RateLimitError) as refused:
        await keys.admit(state, "m", now=120.0)
    assert refused.value.retry_after_seconds == pytest.approx(40.0)
    await keys.admit(state, "m", now=160.5)  # the first has left the window
    await keys.release(state, "openai:gpt-4o", TokenUsage(input_tokens=1000, output_tokens=100))
    spent = await keys.spent("team")
    assert spent is not None and spent > Decimal("0.001")  # 1000 in, 100 out at gpt-4o's prices
    with pytest.raises(BudgetExceededError, match="spent its budget"):
        await keys.admit(state, "m", now=300.0)
    await keys.admit(state, "m", now=300.0, budgeted=False)  # a token count: free
    await keys.release(state, None, None)
    await keys.admit(state, "m", now=301.0, budgeted=False)
    await keys.release(state, None, None)
    with pytest.raises(RateLimitError):  # but a request all the same
        await keys.admit(state, "m", now=302.0, budgeted=False)


LIMITED = {
    "models": ["m"],
    "requests_per_minute": 2,
    "max_concurrent": 1,
    "budget_usd": Decimal("0.001"),
}


@pytest.mark.anyio
async def test_a_keys_models_rate_requests_at_once_and_budget() -> None:
    keys, state = _keys(**LIMITED)
    await check_limits(keys, state)


def test_a_key_is_given_by_digest_or_variable_never_both() -> None:
    with pytest.raises(ValueError, match="one of the two"):
        KeySpec(name="x", sha256=digest("a"), key_env="A")
    with pytest.raises(ConfigError, match="KEY_A is not set"):
        Keys([KeySpec(name="x", key_env="KEY_A")], {})
    assert Keys([KeySpec(name="x", key_env="KEY_A")], {"KEY_A": "a"}).find("a") is not None


def test_a_key_naming_a_model_the_file_does_not_serve_is_refused_with_the_nearest() -> None:
    """A misspelt name in a key's ``models`` would only ever answer that key 403."""
    keys = [{"name": "narrow", "sha256": digest("k"), "models": ["flash", "fallback", "flsh"]}]
    with pytest.raises(ConfigError) as refused:
        gateway_config(Emulator(), {"keys": keys})
    assert str(refused.value) == (
        "<inline>: gateway.keys.narrow.models: 'flsh' is not a model, alias or route of this "
        "file; did you mean 'flash'?"
    )


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"name": "ci", "budget_usd": -1}, "gateway.keys.ci.budget_usd: expected a number >= 0"),
        ({"name": "ci", "rate": 5}, "gateway.keys.ci.rate: unknown key"),
        ({"name": "ci", "key_env": "K"}, "gateway.keys.ci: give the key as sha256"),
        ({"budget_usd": 1}, "gateway.keys.1.name: required key is missing"),
        ({"name": 7, "budget_usd": 1}, "gateway.keys.1.name: expected a string"),
    ],
)
def test_a_keys_error_names_the_key_by_its_name_or_its_place_without_one(
    entry: dict[str, Any], where: str
) -> None:
    """One way to address an entry of ``gateway.keys`` in every error: its name where it has
    one (as an unset ``key_env`` says it), its place in the list where it has none."""
    keys = [{"name": "ok", "sha256": digest("k")}, {"sha256": digest("j"), **entry}]
    with pytest.raises(ConfigError) as refused:
        gateway_config(Emulator(), {"keys": keys})
    assert f"<inline>: {where}" in str(refused.value)


def test_a_keys_unset_variable_names_the_file_and_what_to_set() -> None:
    keys = [{"name": "ci", "key_env": "METIS_TEST_UNSET_KEY"}]
    with pytest.raises(ConfigError) as refused:
        gateway_config(Emulator(), {"keys": keys})
    assert str(refused.value) == (
        "<inline>: gateway.keys.ci.key_env: METIS_TEST_UNSET_KEY is not set; set it in the "
        "gateway's environment to the key 'ci' sends (or give its sha256:)"
    )


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        (  # the simple key is served first, with no limits: the entry's would never apply
            [{"name": "team", "sha256": digest(GATEWAY_KEY), "budget_usd": 5}],
            "<inline>: gateway.keys.team: its key is api_key_env's too, which has no limits",
        ),
        (  # the second would replace the first, whose limits and spend would be its
            [
                {"name": "a", "sha256": digest("one-key"), "requests_per_minute": 5},
                {"name": "b", "key_env": "GATEWAY_KEY_B"},
            ],
            "<inline>: gateway.keys.b: its key is gateway.keys.a's too",
        ),
    ],
)
def test_a_key_given_twice_is_refused_as_the_file_loads(
    keys: list[dict[str, Any]], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One secret is one key: a gateway key's limits and budget are never silently
    another's (they were: the simple key, or the later entry, took its requests)."""
    from metis.gateway.config import GatewayConfig

    data = {
        "adapters": {"openai": {"type": "openai", "api_key_env": "UPSTREAM_KEY"}},
        "models": {"openai:gpt-4o": {"adapter": "openai"}},
        "gateway": {"api_key_env": "GATEWAY_KEY", "keys": keys},
    }
    environ = {"UPSTREAM_KEY": "sk", "GATEWAY_KEY": GATEWAY_KEY, "GATEWAY_KEY_B": "one-key"}
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.from_dict(data, environ=environ)
    assert str(refused.value).startswith(said)


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
        assert spent.json()["error"]["type"] == "insufficient_quota"  # as OpenAI's spent quota
        assert spent.headers["x-should-retry"] == "false"  # no SDK retries a spent budget
        spent = await client.post("/v1/messages", json=SAID, headers={"x-api-key": "spent-key"})
        assert spent.status_code == 429 and spent.headers["x-should-retry"] == "false"
        assert await app.state.gateway.keys.spent("narrow") > 0


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_the_ledger_in_redis_keeps_the_same_limits(redis_url: str) -> None:
    from metis.core.ids import new_ulid
    from metis.gateway.app import redis_client
    from metis.gateway.keys_redis import RedisLedger

    async with redis_client(redis_url) as client:
        fresh = RedisLedger(client, prefix=f"test:{new_ulid()}:")  # one per backend run
        keys = Keys([KeySpec(name="team", sha256=digest("k1"), **LIMITED)], {}, fresh)
        state = keys.find("k1")
        assert state is not None
        await check_limits(keys, state)


def test_two_gateways_over_one_redis_enforce_one_rate_and_one_budget(redis_url: str) -> None:
    """Two gateways, each with its own state, on their own servers: the key's limits are
    counted once between them."""
    from tests.gateway_fixture import serving

    keys = [
        {"name": "shared", "sha256": digest("shared-key"), "requests_per_minute": 3},
        {"name": "paid", "sha256": digest("paid-key"), "budget_usd": "0.000001"},
    ]
    settings = {"keys": keys, "redis_url": redis_url}
    first = create_app(gateway_config(Emulator(), settings))
    second = create_app(gateway_config(Emulator(), settings))
    with serving(first) as (one, _), serving(second) as (two, _):

        def ask(url: str, key: str) -> int:
            headers = {"x-api-key": key}
            return httpx.post(url + "/v1/messages", json=SAID, headers=headers).status_code

        assert [ask(url, "shared-key") for url in (one, two, one, two)] == [200, 200, 200, 429]
        assert ask(one, "paid-key") == 200  # its reply costs more than the budget
        assert ask(two, "paid-key") == 429
        # one Responses conversation across both: the stored responses are shared too
        headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
        said = {"model": "flash", "input": "Hi"}
        started = httpx.post(one + "/v1/responses", json=said, headers=headers).json()
        more = {**said, "input": "And?", "previous_response_id": started["id"]}
        went_on = httpx.post(two + "/v1/responses", json=more, headers=headers)
        assert went_on.status_code == 200, went_on.text


@pytest.mark.anyio
async def test_a_budget_refusal_is_counted_as_budget_not_as_a_rate_limit() -> None:
    """The operator tells a key past its budget from one over its rate in ``/metrics``; the
    caller gets the 429 it always got."""
    keys = [
        {"name": "spent", "sha256": digest("spent-key"), "budget_usd": 0},
        {"name": "fast", "sha256": digest("fast-key"), "requests_per_minute": 1},
    ]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        spent = await client.post("/v1/messages", json=SAID, headers={"x-api-key": "spent-key"})
        assert spent.status_code == 429 and spent.json()["error"]["type"] == "rate_limit_error"
        for _ in range(2):
            await client.post("/v1/messages", json=SAID, headers={"x-api-key": "fast-key"})
        scraped = (await client.get("/metrics")).text
    errors = 'metis_gateway_errors_total{api="anthropic",endpoint="POST /v1/messages",error_class='
    assert errors + '"budget"} 1' in scraped
    assert errors + '"rate_limit"} 1' in scraped


@pytest.mark.anyio
async def test_the_model_list_shows_a_key_only_what_it_may_use() -> None:
    keys = [
        {"name": "narrow", "sha256": digest("narrow-key"), "models": ["flash", "fallback"]},
        {"name": "wide", "sha256": digest("wide-key")},
    ]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:

        async def listed(key: str) -> list[str]:
            answer = await client.get("/v1/models", headers={"x-api-key": key})
            assert answer.status_code == 200
            return [entry["id"] for entry in answer.json()["data"]]

        assert await listed("narrow-key") == ["flash", "fallback"]
        wide = await listed("wide-key")
        assert {"flash", "gpt", "sonnet", "fallback"} <= set(wide) and len(wide) > 2
        assert set(await listed(GATEWAY_KEY)) == set(wide)  # the simple key: every name


GONE_REDIS = "redis://127.0.0.1:1"  # nothing listens on port 1: refused at once


def test_a_key_whose_limits_the_gone_redis_cannot_check_is_told_to_retry() -> None:
    """Redis gone: a key's limits and budget cannot be checked, so its request is not served
    unchecked; the caller gets its API's retried overloaded error, without the store's
    address, and a stored response cannot be read either."""
    keys = [{"name": "team", "sha256": digest("team-key"), "budget_usd": 10}]
    app = create_app(gateway_config(Emulator(), {"keys": keys, "redis_url": GONE_REDIS}))
    again = {"model": "flash", "input": "Hi", "previous_response_id": "resp_1"}
    with serving(app) as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        messages = client.post("/v1/messages", json=SAID, headers={"x-api-key": "team-key"})
        chat = client.post(
            "/v1/chat/completions", json=SAID, headers={"authorization": "Bearer team-key"}
        )
        responses = client.post(
            "/v1/responses", json=again, headers={"authorization": f"Bearer {GATEWAY_KEY}"}
        )
    assert messages.status_code == 529, messages.text
    assert messages.json()["error"]["type"] == "overloaded_error"
    assert messages.headers["retry-after"] == "1"
    assert "check the limits of key 'team'" in messages.text and "127.0.0.1" not in messages.text
    assert chat.status_code == 503, chat.text
    assert responses.status_code == 503 and "resp_1" in responses.text


@pytest.mark.anyio
async def test_a_key_the_gone_redis_cannot_settle_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The answer went out before the key is settled: a store failing then is the
    operator's to see (logged), not the caller's (nothing raised)."""
    from metis.gateway.errors import shared_store_failed

    class GoneLedger:
        async def release(self, state: Any, usd: Decimal) -> None:
            raise shared_store_failed("settle", ConnectionError("gone"))

    keys = Keys([KeySpec(name="team", sha256=digest("k1"))], {}, ledger=GoneLedger())
    state = keys.find("k1")
    assert state is not None
    await keys.release(state, "openai:gpt-4o", TokenUsage(input_tokens=10, output_tokens=1))
    (record,) = [
        r for r in caplog.records if getattr(r, "event", "") == "metis.gateway.key_not_settled"
    ]
    assert "could not settle" in record.getMessage()


@pytest.mark.anyio
async def test_stored_responses_and_the_model_list_are_requests_of_the_key_never_its_budget() -> (
    None
):
    """A key cannot hammer the stored responses' reads and deletes or the model list past its
    rate: each is one of its requests (and takes a place while it runs), refused 429 past it;
    a spent budget refuses none of them."""
    keys = [
        {"name": "slow", "sha256": digest("slow-key"), "requests_per_minute": 6},
        {"name": "spent", "sha256": digest("spent-key"), "budget_usd": 0},
    ]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    transport = httpx.ASGITransport(app=app)
    slow = {"authorization": "Bearer slow-key"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        made = await client.post(
            "/v1/responses", json={"model": "flash", "input": "Hi"}, headers=slow
        )
        assert made.status_code == 200, made.text
        kept = f"/v1/responses/{made.json()['id']}"
        asked = [
            await client.get(kept, headers=slow),
            await client.get(kept + "/input_items", headers=slow),
            await client.get("/v1/models", headers=slow),
            await client.get("/v1/models/flash", headers=slow),
            await client.delete(kept, headers=slow),
        ]
        assert [a.status_code for a in asked] == [200, 200, 200, 200, 200]
        over = [
            await client.get(kept, headers=slow),
            await client.delete(kept, headers=slow),
            await client.get("/v1/models", headers=slow),
        ]
        assert [a.status_code for a in over] == [429, 429, 429]
        assert all(a.headers["retry-after"] for a in over)
        assert "requests per minute" in over[0].json()["error"]["message"]
        for path in ("/v1/models", "/v1/models/flash", "/v1/responses/resp_unknown"):
            spent = await client.get(path, headers={"x-api-key": "spent-key"})
            assert spent.status_code in (200, 404), (path, spent.text)
        state = app.state.gateway.keys.find("slow-key")
        assert state.in_flight == 0  # every place given back


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("store", ["memory", "redis"])
@pytest.mark.parametrize("budget", [None, Decimal(5)], ids=["unbudgeted", "budgeted"])
async def test_a_negative_charge_never_lowers_a_keys_spend_and_is_logged_once(
    store: str,
    budget: Decimal | None,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reply priced below 0 (a wrong catalog price or usage) is a data fault: the key's
    spend is not lowered (a budget would be given back what was spent), and the operator is
    told once per model, not once a request."""
    from contextlib import AsyncExitStack

    from metis.core.ids import new_ulid
    from metis.gateway.app import redis_client
    from metis.gateway.keys_redis import RedisLedger

    prices = {"good": Decimal("1.5"), "bad": Decimal("-0.75")}
    monkeypatch.setattr("metis.gateway.keys.price", lambda model, usage: prices[model])
    usage = TokenUsage(input_tokens=10, output_tokens=5)
    async with AsyncExitStack() as stack:
        ledger = None
        if store == "redis":
            client = await stack.enter_async_context(
                redis_client(request.getfixturevalue("redis_url"))
            )
            ledger = RedisLedger(client, prefix=f"test:{new_ulid()}:")
        keys = Keys([KeySpec(name="team", sha256=digest("k1"), budget_usd=budget)], {}, ledger)
        state = keys.find("k1")
        assert state is not None
        caplog.set_level("ERROR", logger="metis.gateway")
        for model in ["good", "bad", "bad", "good", "bad"]:
            await keys.admit(state, model)
            await keys.release(state, model, usage)
        assert await keys.spent("team") == Decimal(3)
    said = [r.getMessage() for r in caplog.records if r.name == "metis.gateway"]
    assert len(said) == 1, said
    assert "'team'" in said[0] and "'bad'" in said[0] and "-0.75" in said[0]


def test_a_reply_priced_below_0_does_not_lower_the_cost_counter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``metis_gateway_cost_usd_total`` is a counter: a wrong price below 0 leaves it as it
    was (Prometheus reads a counter that goes down as one reset)."""
    from metis.gateway.metrics import Metrics

    priced = iter([Decimal("1.5"), Decimal("-0.75"), Decimal("1.5")])
    monkeypatch.setattr("metis.gateway.metrics.price", lambda model, usage: next(priced))
    metrics = Metrics()
    for _ in range(3):
        metrics.usage("m", TokenUsage(input_tokens=1, output_tokens=1))
    assert metrics.cost == {"m": Decimal(3)}


@pytest.mark.anyio
async def test_a_model_refused_names_the_models_the_key_may_use() -> None:
    """A key refused a model learns which it may name (the 403 said only which it may not),
    alike on every endpoint that names a model."""
    keys = [{"name": "team-a", "sha256": digest("a-key"), "models": ["flash", "fallback"]}]
    app = create_app(gateway_config(Emulator(), {"keys": keys}))
    transport = httpx.ASGITransport(app=app)
    said = "key 'team-a' may not use model 'gpt'; the models and routes it may use: "
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            other = {**SAID, "model": "gpt"}
            refused = await client.post(path, json=other, headers={"x-api-key": "a-key"})
            assert refused.status_code == 403, path
            assert refused.json()["error"]["message"] == said + "'flash', 'fallback'"
    _, state = _keys(models=[])
    with pytest.raises(GatewayPermissionError, match=r"may use: none$"):
        state.check_model("m")
