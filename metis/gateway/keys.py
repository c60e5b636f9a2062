"""Gateway keys (docs/gateway.md): each with the models it may use, a request rate, a number of
requests at once and a USD budget priced from the catalog; kept as SHA-256 digests, in this
process's memory."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from metis.cost import priced_cost
from metis.errors import ConfigError, InvalidRequestError, RateLimitError
from metis.gateway.budget_period import ADJECTIVE, BudgetPeriod, Period, period_at
from metis.gateway.errors import (
    BudgetExceededError,
    GatewayPermissionError,
    KeyRateLimitError,
    SharedStoreError,
    shared_store_failed,
)
from metis.model.response import TokenUsage

WINDOW_SECONDS = 60.0
log = logging.getLogger("metis.gateway")
SETTLE_SECONDS = 5.0
"""The longest a request's end waits for its key to be settled (its place given back, its
charge made); past it, what was not settled is owed to the key's next request."""
ADMIT_SECONDS = 5.0
"""The longest a request waits for its key to be admitted (one reply's wait of the gateway's
Redis client, not its retries'); past it, the request is refused as when the store fails."""
_SETTLE_FAILED = {"event": "metis.gateway.key_not_settled"}
_MISPRICED = {"event": "metis.gateway.charge_refused"}


class KeySpec(BaseModel):
    """One entry of ``gateway.keys``: the key's SHA-256 digest (``sha256``), or the variable
    holding the key (``key_env``), and what it may do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    sha256: str | None = None
    key_env: str | None = Field(default=None, min_length=1)
    models: list[str] | None = None
    """The model ids, aliases and routes the key may name (None: every one)."""
    requests_per_minute: int | None = Field(default=None, ge=1)
    max_concurrent: int | None = Field(default=None, ge=1)
    budget_usd: Decimal | None = Field(default=None, ge=0)
    budget_period: BudgetPeriod = "none"
    """The UTC day or month the spend is kept for (the budget renews as the next starts);
    ``none``: one spend, never renewed."""

    @field_validator("sha256")
    @classmethod
    def _a_digest(cls, given: str | None) -> str | None:
        """The digest in lowercase hex, as :func:`digest` writes it (``sha256sum`` prints the
        same; some tools print it in capitals)."""
        if given is None or re.fullmatch(r"[0-9a-fA-F]{64}", given):
            return given and given.lower()
        raise ValueError(
            'expected the key\'s SHA-256 digest, 64 hex digits (printf %s "$KEY" | sha256sum'
            f", without the ' -' it prints after them); got {len(given)} characters"
        )

    @model_validator(mode="after")
    def _one_source(self) -> KeySpec:
        if (self.sha256 is None) == (self.key_env is None):
            raise ValueError("give the key as sha256 (its digest) or key_env, one of the two")
        return self


@dataclass(slots=True)
class KeyState:
    spec: KeySpec
    started: deque[float] = field(default_factory=deque)
    in_flight: int = 0
    spent: Decimal = Decimal(0)
    spent_in: str = ""
    """The label of the period ``spent`` is of (metis.gateway.budget_period)."""

    def may_use(self, model: str) -> bool:
        """Whether the key may name ``model`` (a model, alias or route)."""
        return self.spec.models is None or model in self.spec.models

    def check_model(self, model: str) -> None:
        """A GatewayPermissionError naming the models the key may use, unless it may use
        ``model``."""
        allowed = self.spec.models
        if allowed is None or model in allowed:
            return
        listed = ", ".join(repr(name) for name in allowed) if allowed else "none"
        raise GatewayPermissionError(
            f"key {self.spec.name!r} may not use model {model!r}; the models and routes it "
            f"may use: {listed}"
        )


def price(model: str, usage: TokenUsage) -> Decimal | None:
    """What ``usage`` cost on ``model`` at the catalog's prices (None: no single price known)."""
    try:
        cost = priced_cost(model, usage)
    except ConfigError:  # a bare name several catalog providers serve
        return None
    return cost.usd if cost is not None else None


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _check_own(name: str, found: str, taken: Mapping[str, KeyState], simple: str | None) -> None:
    """A ConfigError when the key of entry ``name`` is another's too: the simple key's (served
    first, with no limits) or an earlier entry's (which it would replace), so its limits and
    budget would silently never apply."""
    where = f"gateway.keys.{name}"
    if simple is not None and found == digest(simple):
        raise ConfigError(
            f"{where}: its key is api_key_env's too, which has no limits: its limits and "
            "budget would never apply; give it a key of its own"
        )
    if found in taken:
        raise ConfigError(
            f"{where}: its key is gateway.keys.{taken[found].spec.name}'s too; give each "
            "entry a key of its own (one key has one set of limits and one spend)"
        )


# What a ledger says of a request: admitted, or which limit refused it. With the verdict, a
# number: over the rate, the seconds until the minute frees a request; over the budget, the Unix
# time it renews at (0: never).
ADMITTED, OVER_BUDGET, OVER_RATE, OVER_CONCURRENCY = 0, 1, 2, 3


def renews_at(period: Period) -> float:
    """The Unix time ``period``'s budget renews at, as a ledger's refusal says it (0: never)."""
    return 0.0 if period.ends is None else period.ends.timestamp()


class MemoryLedger:
    """Each key's requests, leases and spend (of its period) in this process's memory.
    ``wall``: the Unix time, which sets the period (a test's clock)."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall

    def _period(self, state: KeyState) -> Period:
        """The key's period now, its spend restarted at 0 when a new one has begun."""
        period = period_at(state.spec.budget_period, self.wall())
        if state.spent_in != period.label:
            state.spent_in, state.spent = period.label, Decimal(0)
        return period

    async def admit(
        self, state: KeyState, now: float | None, budgeted: bool = True
    ) -> tuple[int, float]:
        spec = state.spec
        now = time.monotonic() if now is None else now  # a wall clock set back holds nothing
        period = self._period(state)
        if budgeted and spec.budget_usd is not None and state.spent >= spec.budget_usd:
            return OVER_BUDGET, renews_at(period)
        while state.started and state.started[0] <= now - WINDOW_SECONDS:
            state.started.popleft()
        if spec.requests_per_minute is not None and len(state.started) >= spec.requests_per_minute:
            return OVER_RATE, state.started[0] + WINDOW_SECONDS - now
        if spec.max_concurrent is not None and state.in_flight >= spec.max_concurrent:
            return OVER_CONCURRENCY, 1.0
        state.started.append(now)
        state.in_flight += 1
        return ADMITTED, 0.0

    async def release(self, state: KeyState, usd: Decimal) -> None:
        state.in_flight -= 1
        self._period(state)  # charged to the period the request ends in
        state.spent += usd

    async def spent(self, state: KeyState) -> Decimal:
        self._period(state)
        return state.spent


class Keys:
    """The configured keys by digest; ``admit`` checks one request against its key's limits
    (in the ledger: this process's memory, or Redis shared by every gateway) and holds its
    place until ``release``."""

    def __init__(
        self,
        specs: list[KeySpec],
        environ: Mapping[str, str],
        ledger: Any = None,
        simple: str | None = None,
    ) -> None:
        """``simple``: the simple key (``api_key_env``'s), which no entry may share."""
        self.ledger = MemoryLedger() if ledger is None else ledger
        self._by_digest: dict[str, KeyState] = {}
        self._mispriced: set[str] = set()  # the models a reply of was priced below 0
        for spec in specs:
            found = spec.sha256 or ""
            if spec.key_env is not None:
                value = environ.get(spec.key_env)
                if not value:
                    where = f"gateway.keys.{spec.name}.key_env"
                    raise ConfigError(
                        f"{where}: {spec.key_env} is not set; set it in the gateway's "
                        f"environment to the key {spec.name!r} sends (or give its sha256:)"
                    )
                found = digest(value)
            _check_own(spec.name, found, self._by_digest, simple)
            self._by_digest[found] = KeyState(spec)

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def states(self) -> list[KeyState]:
        return list(self._by_digest.values())

    def restrict_models(self) -> bool:
        """Whether some key may name only some of the models."""
        return any(state.spec.models is not None for state in self._by_digest.values())

    def find(self, given: str) -> KeyState | None:
        return self._by_digest.get(digest(given))

    async def admit(
        self, state: KeyState, model: str, now: float | None = None, budgeted: bool = True
    ) -> None:
        """``budgeted``: whether the request costs (a token count does not: a key whose
        budget is spent may still count, within its rate and places). ``now``: the time, in
        seconds, for tests; by default the ledger's own clock (this process's monotonic one,
        or the Redis server's, which every gateway shares however its own clock is set)."""
        state.check_model(model)
        await self._counted(state, now, budgeted)

    @asynccontextmanager
    async def holding(self, state: KeyState | None) -> AsyncIterator[None]:
        """A request that names no model and costs nothing (a stored response read back or
        deleted, the model list) admitted for ``state`` (None: the simple key, no limits):
        within its rate and places, never refused for its budget; its place given back
        when done."""
        if state is None:
            yield
            return
        await self._counted(state, None, budgeted=False)
        try:
            yield
        finally:
            await self.release(state, None, None)

    async def _counted(self, state: KeyState, now: float | None, budgeted: bool) -> None:
        spec = state.spec
        verdict: int | None = None
        wait = 0.0
        with anyio.move_on_after(ADMIT_SECONDS):  # a place the script took is owed back
            verdict, wait = await self.ledger.admit(state, now, budgeted)
        if verdict is None:
            doing = f"check the limits of key {spec.name!r}"
            quiet = TimeoutError(f"it did not answer within {ADMIT_SECONDS:g} s")
            raise shared_store_failed(doing, quiet)  # the log line says why, once
        if verdict == OVER_BUDGET:
            raise _over_budget(spec, wait)
        if verdict == OVER_RATE:
            raise KeyRateLimitError(
                f"key {spec.name!r} is over its {spec.requests_per_minute} requests per minute",
                limit=spec.requests_per_minute or 0,
                retry_after_seconds=max(1.0, wait),
            )
        if verdict == OVER_CONCURRENCY:
            raise RateLimitError(
                f"key {spec.name!r} has {spec.max_concurrent} requests in flight already",
                retry_after_seconds=1.0,
            )

    async def release(self, state: KeyState, model: str | None, usage: TokenUsage | None) -> None:
        """The request is over; what it used (None: nothing known) is charged to the key."""
        usd = price(model, usage) if model is not None and usage is not None else None
        if usd is not None and model is not None and not (usd.is_finite() and usd >= 0):
            self._refuse_charge(state, model, usd)
            usd = None
        # a cancelled request still gives its place back; a store that does not answer holds
        # the answer's end no longer than SETTLE_SECONDS (the ledger owes what it missed)
        with anyio.CancelScope(shield=True), anyio.move_on_after(SETTLE_SECONDS) as waited:
            try:
                await self.ledger.release(state, usd or Decimal(0))
            except SharedStoreError as error:  # the answer went out: said, not raised
                log.error("gateway key not settled: %s", error.message, extra=_SETTLE_FAILED)
        if waited.cancelled_caught:
            log.error(
                "gateway key not settled: the shared store did not answer within %g s; key "
                "%r is settled at its next request",
                SETTLE_SECONDS,
                state.spec.name,
                extra=_SETTLE_FAILED,
            )

    def _refuse_charge(self, state: KeyState, model: str, usd: Decimal) -> None:
        """A reply priced below 0 (or not a number) is a fault of the catalog's price or the
        usage, never credit: not charged, and logged once per model for the operator."""
        if model in self._mispriced:
            return
        self._mispriced.add(model)
        log.error(
            "gateway key %r: a reply of model %r was priced %s USD (a wrong catalog price or "
            "usage): not charged, as a key's spend is never lowered; this model's further "
            "such replies are not logged",
            state.spec.name,
            model,
            format(usd, "f"),
            extra=_MISPRICED,
        )

    async def spent(self, name: str) -> Decimal | None:
        found = next((s for s in self._by_digest.values() if s.spec.name == name), None)
        return None if found is None else await self.ledger.spent(found)


def _over_budget(spec: KeySpec, renews: float) -> BudgetExceededError:
    """The refusal of a key past its budget, which renews at the Unix time ``renews`` (0:
    never: the operator raises it or resets the spend)."""
    if renews:
        when = datetime.fromtimestamp(renews, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        said = (
            f"key {spec.name!r} has spent its {ADJECTIVE[spec.budget_period]} budget of "
            f"{spec.budget_usd:f} USD: it renews at {when}; retrying before then will not help"
        )
    else:
        said = (
            f"key {spec.name!r} has spent its budget of {spec.budget_usd:f} USD: retrying will "
            "not help; the gateway's operator raises the key's budget_usd or resets its spend"
        )
    return BudgetExceededError(
        said,
        provider_code="insufficient_quota",
        retryable=False,  # spent until it renews or the operator raises it: x-should-retry: false
    )


def given_keys(headers: Mapping[str, str]) -> tuple[str, str]:
    """The keys a request gives: its ``x-api-key`` and its ``Authorization: Bearer`` token
    ("" for either not given). A header given twice with different values is refused (a 400):
    which key would count would hang on the order of the headers (a proxy's added after the
    client's), as it did when the first was read and the rest ignored."""
    scheme, _, token = _one(headers, "authorization").partition(" ")
    return _one(headers, "x-api-key"), token.strip() if scheme.lower() == "bearer" else ""


def _one(headers: Mapping[str, str], name: str) -> str:
    getlist = getattr(headers, "getlist", None)  # starlette's Headers: every value given
    given: list[str] = getlist(name) if getlist is not None else [headers.get(name) or ""]
    if len(set(given)) > 1:
        raise InvalidRequestError(
            f"the {name} header is given {len(given)} times with different values: send it once"
        )
    return given[0] if given else ""
