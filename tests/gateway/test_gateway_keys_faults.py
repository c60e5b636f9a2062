"""A gateway key's places and spend under faults: a stream whose body is never begun, a
Redis that drops a request's place as it is given, or given back."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from metis.errors import RateLimitError
from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config, scope

pytestmark = pytest.mark.anyio

ONE_AT_ONCE = [{"name": "solo", "sha256": digest("solo-key"), "max_concurrent": 1}]
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


def _streamed(path: str, body: dict[str, Any], spec: str) -> tuple[dict[str, Any], Any]:
    asked = {**scope(path), "asgi": {"version": "3.0", "spec_version": spec}}
    asked["headers"] = [(b"x-api-key", b"solo-key"), (b"content-type", b"application/json")]
    data = json.dumps(body).encode()
    requested: list[bool] = []

    async def receive() -> dict[str, Any]:
        if not requested:
            requested.append(True)
            return {"type": "http.request", "body": data, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return asked, receive


@pytest.mark.parametrize("model", ["flash", "fallback", "sonnet"])
async def test_a_stream_whose_client_is_gone_before_its_headers_gives_its_place_back(
    model: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ASGI 2.4 servers raise OSError from ``send`` once the client is gone: here at the
    response's start, before its body was begun. Before: the body's generator never began,
    so its ``finally`` (the key's place given back) never ran, and the key was refused for
    good; and the client's going was logged as the gateway's own failure."""
    app = create_app(gateway_config(Emulator(), {"keys": ONE_AT_ONCE}))
    asked, receive = _streamed("/v1/messages", {**SAID, "model": model, "stream": True}, "2.4")

    async def send(message: dict[str, Any]) -> None:
        raise OSError("the client went away")

    async with app.router.lifespan_context(app):
        with anyio.fail_after(60):  # a bound on a hang, not a timing
            await app(asked, receive, send)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            again = await client.post("/v1/messages", json=SAID, headers={"x-api-key": "solo-key"})
    assert again.status_code == 200, again.text
    assert "gateway stream failed" not in caplog.text


class Flaky:
    """A Redis client whose calls fail while ``failing`` (the connection cut): after the
    server did the work (``done``: an admission's reply lost), or before it."""

    def __init__(self, client: Any) -> None:
        self.client, self.failing, self.done = client, False, False
        self.cancelling: anyio.CancelScope | None = None  # cancelled once the server answered
        self.stalling = False  # the server does the work; its reply comes 20 s later
        self.scripts_args: list[list[str]] = []  # each script run's arguments, as sent

    def register_script(self, text: str) -> Any:
        script = self.client.register_script(text)

        async def run(**given: Any) -> Any:
            self.scripts_args.append(list(given.get("args", ())))
            return await self._maybe(lambda: script(**given))

        return run

    async def get(self, *given: Any) -> Any:
        return await self.client.get(*given)

    async def _maybe(self, call: Any) -> Any:
        if self.failing and not self.done:
            raise ConnectionError("connection reset")
        answer = await call()
        if self.stalling:
            await anyio.sleep(20)  # past the settlement's wait, which cancels it
        if self.cancelling is not None:  # the request cancelled as the reply came
            self.cancelling.cancel()
            await anyio.lowlevel.checkpoint()
        if self.failing:
            raise ConnectionError("connection reset after the reply was sent")
        return answer


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("done", [False, True], ids=["before", "after"])
async def test_a_place_or_charge_redis_missed_is_settled_at_the_keys_next_request(
    redis_url: str, done: bool
) -> None:
    """Redis cut as a request's place was given (``after``: given, its reply lost) and as it
    was given back and charged. Before: the place stayed taken for the lease's hour (a key of
    one place refused all that time) and the charge was lost."""
    from metis.gateway.app import redis_client
    from metis.gateway.errors import SharedStoreError
    from metis.gateway.keys import price
    from metis.model.response import TokenUsage

    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client, max_concurrent=1)
        flaky.done = done
        flaky.failing = True
        with pytest.raises(SharedStoreError):
            await keys.admit(state, "m")
        flaky.failing = False
        await keys.admit(state, "m")  # the lost admission's place, if taken, given back
        flaky.failing = True
        usage = TokenUsage(input_tokens=1000, output_tokens=100)
        await keys.release(state, "openai:gpt-4o", usage)  # logged, not raised
        flaky.failing = False
        charge = price("openai:gpt-4o", usage)
        assert await keys.spent("team") == (charge if done else 0)
        await keys.admit(state, "m")  # the place given back, the charge made (once)
        assert await keys.spent("team") == charge
        await keys.release(state, None, None)
        await keys.admit(state, "m")


@pytest.mark.backend_independent(False)
async def test_a_request_cancelled_as_redis_gives_its_place_does_not_keep_it(
    redis_url: str,
) -> None:
    from metis.gateway.app import redis_client

    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client, max_concurrent=1)
        with anyio.CancelScope() as flaky.cancelling:
            await keys.admit(state, "m")
        assert flaky.cancelling.cancelled_caught
        flaky.cancelling = None
        await keys.admit(state, "m")  # before: refused for the lease's hour


def team_keys(client: Any, **limits: Any) -> tuple[Flaky, Any, Any]:
    """The key "team" (secret "k1", ``limits`` of its KeySpec) over ``client`` behind a
    :class:`Flaky`, in a prefix of its own: the flaky client, the keys, the key's state."""
    from metis.core.ids import new_ulid
    from metis.gateway.keys import Keys, KeySpec
    from metis.gateway.keys_redis import RedisLedger

    flaky = Flaky(client)
    ledger = RedisLedger(flaky, prefix=f"test:{new_ulid()}:")
    keys = Keys([KeySpec(name="team", sha256=digest("k1"), **limits)], {}, ledger)
    state = keys.find("k1")
    assert state is not None
    return flaky, keys, state


class SteppedClock:
    """A machine's clocks after its wall clock was set back an hour (an NTP step) and a
    minute and a second went by."""

    def __init__(self) -> None:
        import time

        self.wall, self.steady = time.time() - 3600, time.monotonic() + 61

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.steady


async def test_a_keys_rate_window_in_memory_is_not_held_by_a_wall_clock_set_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the minute's starts were wall-clock times, so a clock set back an hour kept
    the key refused (``retry-after`` 3660) for that hour."""
    from metis.gateway import keys as keys_module
    from metis.gateway.keys import Keys, KeySpec

    keys = Keys([KeySpec(name="team", sha256=digest("k1"), requests_per_minute=1)], {})
    state = keys.find("k1")
    assert state is not None
    await keys.admit(state, "m")
    await keys.release(state, None, None)
    monkeypatch.setattr(keys_module, "time", SteppedClock())
    await keys.admit(state, "m")  # a minute (and a second) later by the steady clock


@pytest.mark.backend_independent(False)
async def test_gateways_whose_clocks_disagree_share_one_rate_window_in_redis(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: each gateway stamped a start with its own wall clock, so one whose clock ran
    an hour ahead refused the key on every other gateway for an hour (``retry-after``
    3660), and one an hour behind had its starts swept away at once (no limit at all)."""
    import time

    from metis.core.ids import new_ulid
    from metis.gateway import keys as keys_module
    from metis.gateway.app import redis_client
    from metis.gateway.keys import Keys, KeySpec
    from metis.gateway.keys_redis import RedisLedger

    spec = KeySpec(name="team", sha256=digest("k1"), requests_per_minute=1)
    prefix = f"test:{new_ulid()}:"
    async with redis_client(redis_url) as client:
        ahead, behind = (Keys([spec], {}, RedisLedger(client, prefix)) for _ in range(2))
        ahead_state, behind_state = ahead.find("k1"), behind.find("k1")
        assert ahead_state is not None and behind_state is not None
        clock = SteppedClock()
        clock.wall = time.time() + 3600
        monkeypatch.setattr(keys_module, "time", clock)
        await ahead.admit(ahead_state, "m")
        await ahead.release(ahead_state, None, None)
        clock.wall = time.time() - 3600
        with pytest.raises(RateLimitError) as refused:
            await behind.admit(behind_state, "m")
    wait = refused.value.retry_after_seconds
    assert wait is not None and wait <= 60


async def test_a_budget_crossed_by_requests_in_flight_is_overspent_by_those_alone() -> None:
    """A budget is checked as a request starts and charged as it ends (docs/gateway.md): two
    streams started under it are both charged, past it; the next request is refused."""
    from decimal import Decimal

    from metis.gateway.keys import BudgetExceededError, Keys, KeySpec
    from metis.model.response import TokenUsage

    spec = KeySpec(name="team", sha256=digest("k1"), budget_usd=Decimal("0.001"))
    keys = Keys([spec], {})
    state = keys.find("k1")
    assert state is not None
    await keys.admit(state, "m")
    await keys.admit(state, "m")
    usage = TokenUsage(input_tokens=1000, output_tokens=100)  # each over the budget alone
    await keys.release(state, "openai:gpt-4o", usage)
    await keys.release(state, "openai:gpt-4o", usage)
    one = await keys.spent("team")
    assert one is not None and one > 2 * Decimal("0.001")  # both charged in full
    with pytest.raises(BudgetExceededError):
        await keys.admit(state, "m")


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("runs", ["first", "every"])
async def test_places_redis_may_have_missed_are_kept_within_bounds(
    redis_url: str, runs: str
) -> None:
    """Many requests refused while Redis failed, each one's place possibly taken: a bounded
    number are given back, in one script, at the key's next request; enough for the one
    place still taken, whether Redis ran only the first request's script (then went) or
    every one (losing each reply)."""
    from metis.gateway.app import redis_client
    from metis.gateway.errors import SharedStoreError
    from metis.gateway.keys_redis import MAX_OWED_LEASES

    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client, max_concurrent=1)
        flaky.failing = flaky.done = True
        for _ in range(2 * MAX_OWED_LEASES):
            with pytest.raises(SharedStoreError):
                await keys.admit(state, "m")
            flaky.done = runs == "every"
        flaky.failing = False
        await keys.admit(state, "m")
        given_back = flaky.scripts_args[-1][9:]  # after the script's own nine arguments
        assert len(given_back) == MAX_OWED_LEASES
        first, latest = flaky.scripts_args[0][5], flaky.scripts_args[-2][5]  # refused leases
        assert (given_back[0], given_back[-1]) == (first, latest)


CANCEL_POINTS = 8
"""The ASGI messages a request is cut at, one run each: its headers, and each chunk after."""


@pytest.mark.parametrize(
    ("model", "streamed"),
    [
        *(
            (model, streamed)
            for model in ("flash", "fallback", "sonnet")
            for streamed in (False, True)
        ),
    ],
)
async def test_a_request_cancelled_at_any_message_gives_its_place_back(
    model: str, streamed: bool
) -> None:
    """The server cancels the request (its client gone) as the k-th message goes out, for
    each k: the key's one place is free again every time."""
    app = create_app(gateway_config(Emulator(), {"keys": ONE_AT_ONCE}))
    body = {**SAID, "model": model, "stream": streamed}
    async with app.router.lifespan_context(app):
        state = app.state.gateway.keys.find("solo-key")
        for point in range(CANCEL_POINTS):
            asked, receive = _streamed("/v1/messages", body, "2.3")
            with anyio.CancelScope() as cut:
                cutter = CutAt(point, cut)
                with anyio.fail_after(60):  # a bound on a hang, not a timing
                    await app(asked, receive, cutter.send)
            assert state.in_flight == 0, (point, cutter.sent[-1:])


class CutAt:
    """An ASGI ``send`` that cancels ``scope`` as message number ``point`` (from 0) goes."""

    def __init__(self, point: int, scope: anyio.CancelScope) -> None:
        self.point, self.scope = point, scope
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if len(self.sent) > self.point:
            self.scope.cancel()
            await anyio.lowlevel.checkpoint()


@pytest.mark.backend_independent(False)
async def test_a_charge_settled_by_a_script_whose_reply_was_lost_is_made_once(
    redis_url: str,
) -> None:
    """Redis flapping: a request's charge not made as it ended is owed; the key's next
    request's script makes it, but its reply is lost (the connection cut after the server ran
    it), so it is owed again; the request after that must not make it a second time. Before:
    the key was charged twice, and a budget refused it early."""
    from metis.gateway.app import redis_client
    from metis.gateway.errors import SharedStoreError
    from metis.gateway.keys import price
    from metis.model.response import TokenUsage

    usage = TokenUsage(input_tokens=1000, output_tokens=100)
    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client)
        await keys.admit(state, "m")
        flaky.failing = True
        await keys.release(state, "openai:gpt-4o", usage)  # not made: owed (logged)
        flaky.done = True
        with pytest.raises(SharedStoreError):
            await keys.admit(state, "m")  # made by the script; its reply lost
        flaky.failing = flaky.done = False
        await keys.admit(state, "m")
        assert await keys.spent("team") == price("openai:gpt-4o", usage)


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("left", ["abc", "NaN", ["a list"]], ids=["text", "nan", "list"])
async def test_a_spend_in_redis_no_gateway_wrote_is_a_classified_error(
    redis_url: str, left: Any
) -> None:
    """Someone else's value under a key's spend: reading the spend says so (before: a bare
    decimal.InvalidOperation, or coredis's own WrongTypeError)."""
    from metis.core.ids import new_ulid
    from metis.errors import AdapterError
    from metis.gateway.app import redis_client
    from metis.gateway.keys import Keys, KeySpec
    from metis.gateway.keys_redis import RedisLedger

    async with redis_client(redis_url) as client:
        ledger = RedisLedger(client, prefix=f"test:{new_ulid()}:")
        keys = Keys([KeySpec(name="team", sha256=digest("k1"))], {}, ledger)
        state = keys.find("k1")
        assert state is not None
        spent = ledger._keys(state)[2]
        if isinstance(left, list):
            await client.rpush(spent, left)
        else:
            await client.set(spent, left)
        with pytest.raises(AdapterError, match="team"):
            await keys.spent("team")


@pytest.mark.backend_independent(False)
async def test_a_redis_that_does_not_answer_as_a_key_settles_does_not_hold_the_answer(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that ran the settlement but whose reply does not come (a DEBUG SLEEP, a link
    that went quiet): the request's end waits a bounded time, not the store's (before: the
    answer's last bytes waited for Redis, up to its retries' 15 s, or for good); the place
    and the charge are settled, once, at the key's next request."""
    from metis.gateway import keys as keys_module
    from metis.gateway.app import redis_client
    from metis.gateway.keys import price
    from metis.model.response import TokenUsage

    usage = TokenUsage(input_tokens=1000, output_tokens=100)
    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client, max_concurrent=1)
        await keys.admit(state, "m")
        flaky.stalling = True
        monkeypatch.setattr(keys_module, "SETTLE_SECONDS", 0.5)  # the 5 s, shorter for the test
        await keys.release(state, "openai:gpt-4o", usage)
        assert "did not answer within 0.5 s" in caplog.text  # before: it waited the 20 s
        monkeypatch.undo()
        flaky.stalling = False
        await keys.admit(state, "m")  # its one place given back
        assert await keys.spent("team") == price("openai:gpt-4o", usage)


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("spend", ["nan", "-inf", "-5"])
async def test_a_spend_of_nan_in_redis_does_not_open_the_budget(redis_url: str, spend: str) -> None:
    """Redis's Lua reads "nan" as a number no comparison holds for, and "-inf" or a negative
    spend as credit: a key whose spend someone set so was admitted for good, past any budget.
    A spend the gateway never writes fails closed: one that is not a finite number is the
    gateway's data fault (500), a negative one a spent budget."""
    from decimal import Decimal

    from metis.core.ids import new_ulid
    from metis.errors import ServerError
    from metis.gateway.app import redis_client
    from metis.gateway.keys import BudgetExceededError, Keys, KeySpec
    from metis.gateway.keys_redis import RedisLedger

    async with redis_client(redis_url) as client:
        ledger = RedisLedger(client, prefix=f"test:{new_ulid()}:")
        spec = KeySpec(name="team", sha256=digest("k1"), budget_usd=Decimal(1))
        keys = Keys([spec], {}, ledger)
        state = keys.find("k1")
        assert state is not None
        await client.set(ledger._keys(state)[2], spend)
        with pytest.raises(BudgetExceededError if spend == "-5" else ServerError):
            await keys.admit(state, "m")


@pytest.mark.backend_independent(False)
async def test_a_redis_that_does_not_answer_as_a_key_is_admitted_refuses_it_in_bounded_time(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that runs the admission but whose reply does not come: the request is refused
    as a store that does not answer is (SharedStoreError: 529 or 503, retried) after
    ADMIT_SECONDS (before: it waited for the reply, the client's three tries of 5 s, or the
    20 s here, and was admitted); the place the script took is given back at the next
    request."""
    from metis.gateway import keys as keys_module
    from metis.gateway.app import redis_client
    from metis.gateway.errors import SharedStoreError

    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client, max_concurrent=1)
        flaky.stalling = True
        monkeypatch.setattr(keys_module, "ADMIT_SECONDS", 0.5)  # the 5 s, shorter for the test
        refused = pytest.raises(SharedStoreError, match="could not check the limits of key 'team'")
        with caplog.at_level(logging.WARNING, "metis.gateway"), refused:
            await keys.admit(state, "m")
        assert caplog.text.count("did not answer within 0.5 s") == 1  # the operator's, once
        with pytest.raises(SharedStoreError):
            async with keys.holding(state):
                pass
        monkeypatch.undo()
        flaky.stalling = False
        await keys.admit(state, "m")  # the places the stalled scripts took, given back


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize(
    ("left", "budget"),
    [("abc", 1), ("abc", None), ("nan", 1), ("-inf", None), (["a list"], 1), (["a list"], None)],
    ids=["text", "text-no-budget", "nan", "inf-no-budget", "list", "list-no-budget"],
)
async def test_a_spend_in_redis_no_gateway_wrote_is_a_500_naming_the_key_not_an_overload(
    redis_url: str, left: Any, budget: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone else's value under a key's spend is the gateway's own data fault: a 500 in the
    caller's shape, not retried, naming the key (never its secret), logged once. Before: the
    admitting script failed on it, a 529 (or 503) the SDKs retry for good, each request
    logged as the store unavailable; a key without a budget was served once, then refused so."""
    import coredis

    from metis.core.ids import new_ulid

    name, secret = f"team-{new_ulid()}", f"sk-{new_ulid()}"
    keys = [{"name": name, "sha256": digest(secret), "budget_usd": budget}]
    app = create_app(gateway_config(Emulator(), {"keys": keys, "redis_url": redis_url}))
    spent = f"metis:gateway:keys:{{{name}}}:spent"
    async with coredis.Redis.from_url(redis_url) as redis:
        if isinstance(left, list):
            await redis.rpush(spent, left)
        else:
            await redis.set(spent, left)
    chat = {"model": "flash", "messages": [{"role": "user", "content": "Hi"}]}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            answers = [
                await client.post("/v1/messages", json=SAID, headers={"x-api-key": secret})
                for _ in range(2)
            ]
            bearer = {"authorization": f"Bearer {secret}"}
            answers.append(await client.post("/v1/chat/completions", json=chat, headers=bearer))
    kinds = [answer.json()["error"]["type"] for answer in answers]
    assert [answer.status_code for answer in answers] == [500] * 3, kinds
    assert kinds == ["api_error", "api_error", "server_error"]
    for answer in answers:
        assert answer.headers["x-should-retry"] == "false"
        assert name in answer.json()["error"]["message"] and secret not in answer.text
    logged = [r for r in caplog.records if name in r.getMessage() and "spend" in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in caplog.records]


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("left", ["abc", " 5"], ids=["text", "spaced"])
async def test_a_charge_a_foreign_spend_refused_is_made_once_the_spend_is_set_right(
    redis_url: str, left: str
) -> None:
    """A spend overwritten while a request ran: its end gives the place back and is not
    raised; its charge is owed, the key refused (500) while the spend is foreign, and charged
    once the operator deletes it. Before (" 5", which Lua reads as a number and INCRBYFLOAT
    refuses): the script remembered the charge's id, then failed to add it, so it was never
    made."""
    from metis.core.ids import new_ulid
    from metis.errors import ServerError
    from metis.gateway.app import redis_client
    from metis.gateway.keys import Keys, KeySpec, price
    from metis.gateway.keys_redis import RedisLedger
    from metis.model.response import TokenUsage

    usage = TokenUsage(input_tokens=1000, output_tokens=100)
    async with redis_client(redis_url) as client:
        ledger = RedisLedger(client, prefix=f"test:{new_ulid()}:")
        keys = Keys([KeySpec(name="team", sha256=digest("k1"), max_concurrent=1)], {}, ledger)
        state = keys.find("k1")
        assert state is not None
        await keys.admit(state, "m")
        await client.set(ledger._keys(state)[2], left)
        await keys.release(state, "openai:gpt-4o", usage)
        with pytest.raises(ServerError, match="team"):
            await keys.admit(state, "m")
        await client.delete([ledger._keys(state)[2]])
        await keys.admit(state, "m")  # its one place was given back
        assert await keys.spent("team") == price("openai:gpt-4o", usage)


class LaterClock:
    """This process's steady clock, ``ahead`` seconds on."""

    def __init__(self, ahead: float) -> None:
        import time

        self.ahead, self.clock = ahead, time

    def monotonic(self) -> float:
        return self.clock.monotonic() + self.ahead


@pytest.mark.backend_independent(False)
@pytest.mark.parametrize("done", [False, True], ids=["lost", "made"])
async def test_a_charge_owed_past_an_hour_of_outage_is_dropped_and_logged_not_made_twice(
    redis_url: str, done: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A charge not settled as its request ended (``made``: Redis made it, its reply lost),
    then more than an hour of outage. Before: its id, remembered an hour, was gone, so the
    next request charged it again. Now an owed charge lives OWED_CHARGE_SECONDS, less than
    Redis remembers its id (CHARGE_SECONDS), and is dropped past it, logged with the key and
    the USD for the operator: made once, or not at all and said."""
    import time

    from metis.gateway import keys_redis
    from metis.gateway.app import redis_client
    from metis.gateway.keys import price
    from metis.gateway.keys_redis import CHARGE_SECONDS, OWED_CHARGE_SECONDS
    from metis.model.response import TokenUsage

    assert OWED_CHARGE_SECONDS < CHARGE_SECONDS
    usage = TokenUsage(input_tokens=1000, output_tokens=100)
    charge = price("openai:gpt-4o", usage)
    async with redis_client(redis_url) as client:
        flaky, keys, state = team_keys(client)
        await keys.admit(state, "m")
        flaky.failing, flaky.done = True, done
        await keys.release(state, "openai:gpt-4o", usage)  # owed (logged)
        flaky.failing = flaky.done = False
        monkeypatch.setattr(keys_redis, "time", LaterClock(OWED_CHARGE_SECONDS + 1))
        await keys.admit(state, "m", now=time.time() + OWED_CHARGE_SECONDS + 1)
        assert await keys.spent("team") == (charge if done else 0)
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1 and "'team'" in dropped[0] and format(charge, "f") in dropped[0]
