"""A key's budget period (``budget_period: day | month``): its spend kept per UTC day or month,
in memory and in Redis (under the period's start, expiring past its end), the budget renewed as
the next period starts and the refusal saying when."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from metis.errors import ConfigError
from metis.gateway.budget_period import period_at
from metis.gateway.keys import BudgetExceededError, Keys, KeySpec, MemoryLedger, digest
from metis.model.response import TokenUsage
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config

USED = TokenUsage(input_tokens=1000, output_tokens=100)  # over 0.001 USD at gpt-4o's prices


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("kind", "when", "label", "ends"),
    [
        ("day", "2030-02-28T23:59:59", "day:2030-02-28", "2030-03-01T00:00:00"),
        ("month", "2030-02-01T00:00:00", "month:2030-02-01", "2030-03-01T00:00:00"),
        ("month", "2030-12-31T23:59:59", "month:2030-12-01", "2031-01-01T00:00:00"),
        ("month", "2032-02-29T12:00:00", "month:2032-02-01", "2032-03-01T00:00:00"),
    ],
)
def test_a_period_is_its_utc_day_or_month(kind: Any, when: str, label: str, ends: str) -> None:
    period = period_at(kind, _at(when))
    assert period.label == label
    assert period.ends == datetime.fromisoformat(ends).replace(tzinfo=UTC)


def test_no_period_never_renews() -> None:
    period = period_at("none", _at("2030-01-01T00:00:00"))
    assert period.label == "" and period.ends is None


class Wall:
    """A settable Unix time."""

    def __init__(self, text: str) -> None:
        self.now = _at(text)

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def _ledger(store: str, request: pytest.FixtureRequest, wall: Wall) -> AsyncIterator[Any]:
    if store == "memory":
        yield MemoryLedger(wall)
        return
    from metis.core.ids import new_ulid
    from metis.gateway.app import redis_client
    from metis.gateway.keys_redis import RedisLedger

    async with redis_client(request.getfixturevalue("redis_url")) as client:
        yield RedisLedger(client, prefix=f"test:{new_ulid()}:", wall=wall)


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("store", ["memory", "redis"])
@pytest.mark.parametrize(
    ("kind", "spent_at", "refused_at", "renewed_at", "said"),
    [
        (
            "month",
            "2030-11-15T10:00:00",
            "2030-11-30T23:59:59",
            "2030-12-01T00:00:00",
            "monthly budget of 0.001 USD: it renews at 2030-12-01T00:00:00Z",
        ),
        (
            "day",
            "2030-11-15T00:00:00",
            "2030-11-15T23:59:59",
            "2030-11-16T00:00:00",
            "daily budget of 0.001 USD: it renews at 2030-11-16T00:00:00Z",
        ),
    ],
)
async def test_a_periods_budget_renews_as_the_next_period_starts(
    store: str,
    request: pytest.FixtureRequest,
    kind: str,
    spent_at: str,
    refused_at: str,
    renewed_at: str,
    said: str,
) -> None:
    wall = Wall(spent_at)
    spec = KeySpec(name="fin", sha256=digest("k1"), budget_usd=Decimal("0.001"), budget_period=kind)
    async with _ledger(store, request, wall) as ledger:
        keys = Keys([spec], {}, ledger)
        state = keys.find("k1")
        assert state is not None
        await keys.admit(state, "m")
        await keys.release(state, "openai:gpt-4o", USED)
        wall.now = _at(refused_at)
        with pytest.raises(BudgetExceededError) as refused:
            await keys.admit(state, "m")
        assert said in str(refused.value)
        wall.now = _at(renewed_at)
        assert await keys.spent("fin") == 0
        await keys.admit(state, "m")  # renewed
        await keys.release(state, "openai:gpt-4o", USED)
        assert (spent := await keys.spent("fin")) is not None and spent > Decimal("0.001")
        with pytest.raises(BudgetExceededError):
            await keys.admit(state, "m")


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_a_periods_spend_in_redis_is_under_its_start_and_expires_past_its_end(
    redis_url: str,
) -> None:
    from metis.core.ids import new_ulid
    from metis.gateway.app import redis_client
    from metis.gateway.keys_redis import SPEND_KEPT_SECONDS, RedisLedger

    wall = Wall("2030-11-15T10:00:00")
    prefix = f"test:{new_ulid()}:"
    spec = KeySpec(name="fin", sha256=digest("k1"), budget_usd=1, budget_period="month")
    async with redis_client(redis_url) as client:
        keys = Keys([spec], {}, RedisLedger(client, prefix=prefix, wall=wall))
        state = keys.find("k1")
        assert state is not None
        await keys.admit(state, "m")
        await keys.release(state, "openai:gpt-4o", USED)
        spent = f"{prefix}{{fin}}:spent:month:2030-11-01"
        assert Decimal((await client.get(spent)).decode()) > 0
        expires = (await client.expiretime(spent)).timestamp()
        assert expires == _at("2030-12-01T00:00:00") + SPEND_KEPT_SECONDS


def test_an_unknown_budget_period_is_a_config_error_naming_the_key() -> None:
    keys = [{"name": "fin", "sha256": digest("k"), "budget_usd": 5, "budget_period": "week"}]
    with pytest.raises(ConfigError, match=r"gateway\.keys\.fin\.budget_period"):
        gateway_config(Emulator(), {"keys": keys})


class _Server:
    """A Redis client whose ``TIME`` says ``said`` (its clock), counting the asks."""

    def __init__(self, said: str) -> None:
        self.said, self.asked = datetime.fromisoformat(said).replace(tzinfo=UTC), 0

    async def time(self) -> datetime:
        self.asked += 1
        return self.said


@pytest.mark.anyio
async def test_the_servers_clock_is_read_once_a_minute_and_moved_on_by_ours() -> None:
    from metis.redis.server_clock import WALL_REFRESH_SECONDS, ServerWall

    server, local, steady = (
        _Server("2030-12-01T00:00:05"),
        Wall("2030-11-30T23:59:00"),
        Wall("2030-01-01T00:00:00"),
    )
    wall = ServerWall(server, local=local, steady=steady)
    assert await wall.now() == _at("2030-12-01T00:00:05")  # ours is 65 s behind the server's
    local.now += 10
    assert await wall.now() == _at("2030-12-01T00:00:15") and server.asked == 1
    steady.now += WALL_REFRESH_SECONDS
    await wall.now()
    assert server.asked == 2


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_every_gateway_keeps_a_period_by_the_redis_servers_clock(redis_url: str) -> None:
    """Two gateways whose clocks disagree by a month (one set 40 days ahead) over one Redis:
    each keeps the key's spend of the Redis server's period, so the budget is one, and `metis
    keys` (the ledger's period) says that period too."""
    import time

    from metis.core.ids import new_ulid
    from metis.gateway.app import redis_client
    from metis.gateway.keys_redis import RedisLedger

    prefix = f"test:{new_ulid()}:"
    spec = KeySpec(name="fin", sha256=digest("k1"), budget_usd=1, budget_period="month")
    async with redis_client(redis_url) as client:
        right, ahead = RedisLedger(client, prefix=prefix), RedisLedger(client, prefix=prefix)
        ahead.server_wall.local = lambda: time.time() + 40 * 86400
        keys = Keys([spec], {}, ahead)
        state = keys.find("k1")
        assert state is not None
        await keys.admit(state, "m")
        await keys.release(state, "openai:gpt-4o", USED)
        server = (await client.time()).timestamp()
        label = period_at("month", server).label
        assert (await ahead.period(state)).label == (await right.period(state)).label == label
        assert await right.spent(state) == await keys.spent("fin") > 0
