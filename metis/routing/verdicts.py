"""What a route learns of its models' availability from each attempt: told to the availability
store (or to the local one standing in while the store fails), and, when a model's state
changes, to telemetry as an :class:`~metis.telemetry.AvailabilityChanged` event."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

from metis.errors import AdapterError
from metis.routing.availability import Admission, AvailabilityStore, Change
from metis.routing.shared_state import Fallback, emit_safely
from metis.routing.spec import DEFAULT_FALLBACK_ON
from metis.telemetry import AvailabilityChanged, TelemetrySink

AVAILABILITY_ERRORS = DEFAULT_FALLBACK_ON
"""The error classes that say a model is unavailable (and cool it down)."""


class Verdicts:
    """A route's availability bookkeeping; ``telemetry`` is the route's sink, kept current."""

    def __init__(self, store: Fallback[AvailabilityStore], telemetry: TelemetrySink) -> None:
        self._store = store
        self.telemetry = telemetry

    async def admit(self, key: str, deadline: float) -> Admission:
        """May a call go to the model ``key`` now (see :meth:`AvailabilityStore.admit`)."""
        admission, change = await self._store.run(lambda store: store.admit(key), deadline)
        self._emit(change)
        return admission

    async def succeeded(self, key: str) -> None:
        await self._changed(lambda store: store.succeeded(key))

    async def abandoned(self, key: str) -> None:
        """A call that took the probe ended with no verdict: the next call may probe."""
        await self._changed(lambda store: store.abandoned(key))

    async def failed(self, key: str, error: AdapterError, probe: bool) -> None:
        """An attempt failed: the model cools down for an error of unavailability; one the
        provider answered says it is up; else a probe taken is left for the next call."""
        if error.error_class in AVAILABILITY_ERRORS:
            await self.failed_serving(key, error)
        elif error.provider_status is not None:
            await self.succeeded(key)
        elif probe:
            await self.abandoned(key)

    async def failed_serving(self, key: str, error: AdapterError) -> None:
        """A stream failed after its first event: no moving on, but the model may cool down."""
        if error.error_class in AVAILABILITY_ERRORS:
            error_class, retry_after = error.error_class, error.retry_after_seconds
            await self._changed(lambda store: store.failed(key, error_class, retry_after))

    async def _changed(
        self, change: Callable[[AvailabilityStore], Awaitable[Change | None]]
    ) -> None:
        with anyio.CancelScope(shield=True):
            self._emit(await self._store.run(change))

    def _emit(self, change: Change | None) -> None:
        if change is None:
            return
        event = AvailabilityChanged(
            key=change.key,
            old_state=change.old.state.value,
            new_state=change.new.state.value,
            cooldown_seconds=change.cooldown_seconds,
            failures=change.new.failures,
            reason=change.reason,
            timestamp=time.time(),
        )
        emit_safely(self.telemetry, event)
