"""Availability of each (platform, model): available, cooling down, probing.

A model that fails with an availability error (after its adapter's own retries) cools down
for a time derived from the error class and the provider's Retry-After; each failure in a row
doubles it, up to a cap. When the cool-down is over, the next call to reach it is admitted as
the one probe; others skip it while the probe runs. A success (any answer from the provider)
makes it available again and forgets the failures; a failed probe cools it down again, longer.

The rules are pure functions over an :class:`AvailabilityRecord` and a clock reading, so they
are tested with a fake clock. :class:`InMemoryAvailability` keeps the records in a dict (one
process); :mod:`metis.redis.availability` keeps them in Redis, shared by workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from metis.core.options import checked_init
from metis.errors import MAX_RETRY_AFTER_SECONDS, ErrorClass


class State(StrEnum):
    AVAILABLE = "available"
    COOLING_DOWN = "cooling_down"
    PROBING = "probing"


@checked_init
@dataclass(frozen=True, slots=True)
class CooldownPolicy:
    """How long a model cools down: ``base[error class] * 2 ** (failures - 1)``, at least the
    provider's Retry-After, at most ``max_seconds``. A probe that gets no answer within
    ``probe_timeout`` seconds (its caller vanished) frees the model for another probe."""

    base_seconds: tuple[tuple[ErrorClass, float], ...] = (
        (ErrorClass.RATE_LIMIT, 5.0),
        (ErrorClass.OVERLOADED, 10.0),
        (ErrorClass.SERVER_ERROR, 5.0),
        (ErrorClass.NETWORK, 5.0),
    )
    default_seconds: float = 5.0
    max_seconds: float = 300.0
    probe_timeout: float = 120.0

    def cooldown(self, error_class: ErrorClass, failures: int, retry_after: float | None) -> float:
        """Seconds to cool down after ``failures`` failures in a row, the last of
        ``error_class``, the provider having said ``retry_after``."""
        base = dict(self.base_seconds).get(error_class, self.default_seconds)
        backoff = base * 2.0 ** min(max(failures - 1, 0), 32)
        told = min(retry_after, MAX_RETRY_AFTER_SECONDS) if retry_after else 0.0
        return min(max(backoff, told), self.max_seconds)


@dataclass(frozen=True, slots=True)
class AvailabilityRecord:
    state: State = State.AVAILABLE
    failures: int = 0
    until: float = 0.0
    """Cooling down: when it ends. Probing: when the probe is given up for lost."""


@dataclass(frozen=True, slots=True)
class Admission:
    """May a call go to this model now? ``probe``: it is the one trial after a cool-down."""

    admitted: bool
    probe: bool
    state: State
    wait_seconds: float = 0.0
    """Not admitted: about how long until it may be tried again."""

    @property
    def retry_after(self) -> float | None:
        """Not admitted: when to try again, if known (a probe in flight may end any moment)."""
        return None if self.admitted or self.state is State.PROBING else self.wait_seconds

    @property
    def reason(self) -> str:
        """Why the call may or may not go, in words (for telemetry)."""
        if self.admitted:
            return "probing after a cool-down" if self.probe else "available"
        if self.state is State.PROBING:
            return "another call is probing it"
        return f"cooling down ({self.wait_seconds:.1f} s left)"


@dataclass(frozen=True, slots=True)
class Change:
    """A state change, for telemetry."""

    key: str
    old: AvailabilityRecord
    new: AvailabilityRecord
    reason: str
    cooldown_seconds: float = 0.0


# The rules ------------------------------------------------------------------------------


def admit(
    record: AvailabilityRecord, now: float, policy: CooldownPolicy
) -> tuple[Admission, AvailabilityRecord]:
    """Whether a call may go now, and the record once it has gone."""
    if record.state is State.AVAILABLE:
        return Admission(True, False, record.state), record
    if now < record.until:
        return Admission(False, False, record.state, record.until - now), record
    probing = replace(record, state=State.PROBING, until=now + policy.probe_timeout)
    return Admission(True, True, State.PROBING), probing


def succeeded(record: AvailabilityRecord) -> AvailabilityRecord:
    return AvailabilityRecord()


def failed(
    record: AvailabilityRecord,
    now: float,
    policy: CooldownPolicy,
    error_class: ErrorClass,
    retry_after: float | None,
) -> tuple[AvailabilityRecord, float]:
    failures = record.failures + 1
    seconds = policy.cooldown(error_class, failures, retry_after)
    return AvailabilityRecord(State.COOLING_DOWN, failures, now + seconds), seconds


def abandoned(record: AvailabilityRecord, now: float) -> AvailabilityRecord:
    """A probe ended with no verdict (its caller was cancelled): the next call may probe."""
    if record.state is not State.PROBING:
        return record
    return replace(record, state=State.COOLING_DOWN, until=now)


# Where the records live ------------------------------------------------------------------


class AvailabilityStore(Protocol):
    """Keeps each key's record and applies the rules atomically."""

    async def admit(self, key: str) -> tuple[Admission, Change | None]:
        """May a call go to the model ``key`` now (a probe after its cool-down), and the
        change it made."""
        ...

    async def succeeded(self, key: str) -> Change | None:
        """A call to ``key`` succeeded: it is available again; the change, if any."""
        ...

    async def failed(
        self, key: str, error_class: ErrorClass, retry_after: float | None
    ) -> Change | None:
        """A call to ``key`` failed with ``error_class``: it cools down (at least
        ``retry_after`` seconds); the change, if any."""
        ...

    async def abandoned(self, key: str) -> Change | None:
        """A probe of ``key`` ended with no verdict: the next call may probe; the change, if
        any."""
        ...

    async def record(self, key: str) -> AvailabilityRecord:
        """The record kept for ``key`` (available when none is)."""
        ...


@checked_init
class InMemoryAvailability:
    """The records of one process. ``clock`` is seconds on any monotonic scale."""

    def __init__(
        self,
        policy: CooldownPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or CooldownPolicy()
        self.clock = clock
        self._records: dict[str, AvailabilityRecord] = {}

    async def record(self, key: str) -> AvailabilityRecord:
        """The record kept for ``key`` (available when none is)."""
        return self._get(key, self.clock())

    async def admit(self, key: str) -> tuple[Admission, Change | None]:
        """May a call go to the model ``key`` now, and the change it made."""
        now = self.clock()
        old = self._get(key, now)
        admission, new = admit(old, now, self.policy)
        return admission, self._set(key, old, new, "probe")

    async def succeeded(self, key: str) -> Change | None:
        """A call to ``key`` succeeded: it is available again; the change, if any."""
        old = self._get(key, self.clock())
        return self._set(key, old, succeeded(old), "success")

    async def failed(
        self, key: str, error_class: ErrorClass, retry_after: float | None
    ) -> Change | None:
        """A call to ``key`` failed: it cools down; the change, if any."""
        now = self.clock()
        old = self._get(key, now)
        new, seconds = failed(old, now, self.policy, error_class, retry_after)
        return self._set(key, old, new, error_class.value, seconds)

    async def abandoned(self, key: str) -> Change | None:
        """A probe of ``key`` ended with no verdict: the next call may probe."""
        now = self.clock()
        old = self._get(key, now)
        return self._set(key, old, abandoned(old, now), "abandoned")

    def _get(self, key: str, now: float) -> AvailabilityRecord:
        record = self._records.get(key, AvailabilityRecord())
        if record.state is State.PROBING and now >= record.until:  # the probe was lost
            record = abandoned(record, now)
        return record

    def _set(
        self,
        key: str,
        old: AvailabilityRecord,
        new: AvailabilityRecord,
        reason: str,
        seconds: float = 0.0,
    ) -> Change | None:
        if new == AvailabilityRecord():
            self._records.pop(key, None)
        else:
            self._records[key] = new
        if new.state is old.state and new.failures == old.failures:
            return None
        return Change(key, old, new, reason, seconds)
