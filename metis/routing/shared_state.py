"""Shared routing state that never stops a call.

A router's availability records, token buckets and concurrency slots may live in a store that
worker processes share (Redis: :mod:`metis.routing.availability_redis`,
:mod:`metis.routing.limits_redis`). Every operation on such a store is bounded: by ``timeout``
seconds, and before a call is sent by the call's own deadline. When the store fails or does not
answer in time, the operation is done on this process's own state instead (an in-memory store of
the same kind), and the router keeps to its own state for ``recheck_seconds`` before asking the
shared store again. Going local is logged once, as a WARNING, and is a telemetry event
(:class:`~metis.telemetry.SharedStateChanged`, ``state="local"``); so is the store's return
(``state="shared"``, logged at INFO). A shared store's failure therefore never fails a routed
call, and never loses an answer the provider gave: while it is down, each process applies the
limits and cool-downs on its own.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import anyio

from metis.core.raised import is_stray_cancel
from metis.errors import ConfigError, redact
from metis.telemetry import NULL_SINK, SharedStateChanged, TelemetryEvent, TelemetrySink

log = logging.getLogger("metis")

S = TypeVar("S")
T = TypeVar("T")

SHARED_STATE_TIMEOUT = 1.0
"""Seconds a router waits for one operation on a shared store before doing it locally."""
RECHECK_SECONDS = 5.0
"""Seconds a router keeps to its own state after a shared store failed, before asking it again."""


def checked_timeout(value: Any, owner: str) -> float:
    """``value`` as a ``shared_state_timeout``: seconds, finite and > 0, else a ConfigError
    naming ``owner`` (``Router``)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 < value < math.inf:  # NaN fails too
        raise ConfigError(
            f"{owner}(shared_state_timeout): expected a number of seconds > 0, got {value!r}"
        )
    return float(value)


class Fallback(Generic[S]):
    """One store of a router's state (``shared``), and the local one that stands in for it
    (``local``) while it fails. With ``shared is local`` there is nothing to fall back from."""

    def __init__(
        self,
        kind: str,
        shared: S,
        local: S,
        *,
        route: str = "",
        telemetry: TelemetrySink = NULL_SINK,
        timeout: float = SHARED_STATE_TIMEOUT,
        recheck_seconds: float | None = None,
        outage: set[str] | None = None,
    ) -> None:
        self.kind = kind
        self.shared = shared
        self.local = local
        self.route = route
        self.telemetry = telemetry
        self.timeout = timeout
        self.recheck_seconds = RECHECK_SECONDS if recheck_seconds is None else recheck_seconds
        self._outage = set() if outage is None else outage
        """The stores (of one router) now local: the first to go local is the one WARNING."""
        self._local_until = -math.inf
        self._degraded = False

    @classmethod
    def local_only(cls, kind: str, store: S) -> Fallback[S]:
        """A store of this process's own: used as it is."""
        return cls(kind, store, store)

    @property
    def degraded(self) -> bool:
        """Whether the shared store failed last time it was asked."""
        return self._degraded

    async def run(self, operation: Callable[[S], Awaitable[T]], deadline: float = math.inf) -> T:
        """``operation`` on the shared store, within ``timeout`` seconds and ``deadline`` (on
        the event loop's clock); on the local store when the shared one fails, does not answer
        in time, or failed less than ``recheck_seconds`` ago."""
        now = anyio.current_time()
        if self.shared is self.local or now < self._local_until:
            return await operation(self.local)
        own_limit = now + self.timeout
        failure = ""
        with anyio.CancelScope(deadline=min(own_limit, deadline)):
            try:
                result = await operation(self.shared)
            except BaseException as exc:  # a CancelledError no one cancelled the call for too
                if not isinstance(exc, Exception) and not is_stray_cancel(exc):
                    raise  # the call's own cancellation (or this scope's), the application's
                failure = _describe(exc)
            else:
                self._answered()
                return result
        if failure or deadline >= own_limit:  # the store's fault, not the call's deadline
            self._failed(failure or f"no answer within {self.timeout:g} s")
        return await operation(self.local)

    async def everywhere(self, operation: Callable[[S], Awaitable[None]]) -> None:
        """``operation`` on the local store, and on the shared one as :meth:`run` does (giving
        back what either may have handed out)."""
        if self.shared is not self.local:
            await operation(self.local)
        await self.run(operation)

    def _failed(self, reason: str) -> None:
        self._local_until = anyio.current_time() + self.recheck_seconds
        if self._degraded:
            return
        self._degraded = True
        level = logging.INFO if self._outage else logging.WARNING
        self._outage.add(self.kind)
        log.log(
            level,
            "route %s: the shared %s store failed (%s); using this process's own until it "
            "answers again",
            self.route,
            self.kind,
            reason,
            extra={"event": SharedStateChanged.name, "store": self.kind, "reason": reason},
        )
        self._emit("local", reason)

    def _answered(self) -> None:
        if not self._degraded:
            return
        self._degraded = False
        self._outage.discard(self.kind)
        log.info("route %s: the shared %s store answers again", self.route, self.kind)
        self._emit("shared", "answered again")

    def _emit(self, state: str, reason: str) -> None:
        event = SharedStateChanged(self.route, self.kind, state, reason, time.time())
        emit_safely(self.telemetry, event)


_failing_sinks: weakref.WeakSet[Any] = weakref.WeakSet()


def emit_safely(sink: TelemetrySink, event: TelemetryEvent) -> None:
    """Hand ``event`` to ``sink``; a sink that raises is logged (once per sink) and ignored, so
    that telemetry never costs a call its answer."""
    try:
        sink.emit(event)
    except Exception:
        try:
            first = sink not in _failing_sinks
            _failing_sinks.add(sink)
        except TypeError:  # a sink that takes no weak reference: logged each time
            first = True
        if first:
            log.exception("telemetry sink %r failed on %s; the call goes on", sink, event.name)


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = redact(str(exc))[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
