"""Bus events for each attempt at a call, and the sinks that receive them (docs/contract.md §2).

The canonical stream events go to the caller; these go on a separate channel, the bus:

* ``llm.call_started`` when an attempt begins (one per attempt: a call retried twice has three),
* ``llm.call_completed`` when an attempt ends with a message,
* ``llm.call_failed`` when an attempt ends in an error, a cancellation of the caller's task, or
  a stream the caller closed before its message was complete,
* ``metis.tool_id_store_failed`` when the session's tool-id store could not be read or written
  (the ``tool_ids`` stage emits it; the call goes on with derived ids).

The ``telemetry`` stage (:mod:`metis.stages.control.telemetry`) emits them, sitting inside the retry
stage so it sees every attempt; ``retry_count`` is the attempt's number of retries before it.
A sink is anything with a synchronous ``emit(event)``; it must be cheap (it runs in the call's
task) and should not raise: the stage logs a failing sink once and carries on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol, TypeAlias

from metis.core.options import checked_init
from metis.model.response import StopReason, TokenUsage

__all__ = [
    "NULL_SINK",
    "AvailabilityChanged",
    "CallCompleted",
    "CallFailed",
    "CallStarted",
    "ListSink",
    "LoggingSink",
    "MultiSink",
    "NullSink",
    "OpenTelemetrySink",
    "RouteDecided",
    "TelemetryEvent",
    "TelemetrySink",
    "ToolIdStoreFailed",
]


@dataclass(frozen=True, slots=True)
class _BusEvent:
    """Which attempt of which call: the fields every bus event carries."""

    name: ClassVar[str]
    request_id: str
    session_id: str | None
    provider: str
    model: str
    wire_model: str
    retry_count: int
    timestamp: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"event": "llm.call_started", "request_id": ..., ...}``."""
        out: dict[str, Any] = {"event": self.name}
        for f in fields(self):
            value = getattr(self, f.name)
            if hasattr(value, "model_dump"):
                value = value.model_dump(mode="json")
            out[f.name] = value
        return out


@dataclass(frozen=True, slots=True)
class CallStarted(_BusEvent):
    """An attempt is about to be sent. ``timestamp`` is wall-clock seconds (``time.time()``)."""

    name: ClassVar[str] = "llm.call_started"
    stream: bool


@dataclass(frozen=True, slots=True)
class CallCompleted(_BusEvent):
    """An attempt ended with a ``message.complete`` and no error after it. The stop reason may
    be ``cancelled`` (``Adapter.cancel`` ends a stream with a message, docs/contract.md §2)."""

    name: ClassVar[str] = "llm.call_completed"
    latency_ms: int
    usage: TokenUsage
    stop_reason: StopReason
    message_id: str | None
    response_model: str | None = None
    time_to_first_chunk_ms: int | None = None
    """From sending to the first canonical event."""


@dataclass(frozen=True, slots=True)
class CallFailed(_BusEvent):
    """An attempt ended in an error. ``error_class`` is an :class:`~metis.errors.ErrorClass`
    value, or ``"cancelled"`` when the caller's task was cancelled or the caller closed the
    stream early. ``error_message`` is already redacted. ``usage`` is the partial usage when a
    ``message.complete`` (stop reason ``error``) came before the error, else None."""

    name: ClassVar[str] = "llm.call_failed"
    latency_ms: int
    error_class: str
    error_message: str
    provider_status: int | None
    retryable: bool
    usage: TokenUsage | None = None


@dataclass(frozen=True, slots=True)
class ToolIdStoreFailed(_BusEvent):
    """The session's tool-id store failed, or the call's cancel or deadline cut it off, so the
    call went on with derived provider ids. ``operation`` is ``read`` (before the request) or
    ``write`` (recording the reply's ids); ``error_message`` is already redacted."""

    name: ClassVar[str] = "metis.tool_id_store_failed"
    operation: str
    error_class: str
    error_message: str


@dataclass(frozen=True, slots=True)
class RouteDecided:
    """A router chose who serves a call (metis.routing). ``served_by`` is the model that
    served it (None when none did); ``steps`` is every model considered, in order, as
    ``(model, outcome, reason)`` with outcome ``served``, ``skipped`` or ``failed``."""

    name: ClassVar[str] = "metis.route_decided"
    request_id: str
    session_id: str | None
    route: str
    served_by: str | None
    steps: tuple[tuple[str, str, str], ...]
    timestamp: float

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.name}
        out.update({f.name: getattr(self, f.name) for f in fields(self)})
        out["steps"] = [list(step) for step in self.steps]
        return out


@dataclass(frozen=True, slots=True)
class AvailabilityChanged:
    """A (platform, model) moved between ``available``, ``cooling_down`` and ``probing``
    (metis.routing). ``cooldown_seconds`` is how long it now cools down (0 unless cooling);
    ``failures`` counts its failures in a row; ``reason`` is the error class, or ``success``."""

    name: ClassVar[str] = "metis.availability_changed"
    key: str
    old_state: str
    new_state: str
    cooldown_seconds: float
    failures: int
    reason: str
    timestamp: float

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.name}
        out.update({f.name: getattr(self, f.name) for f in fields(self)})
        return out


RoutingEvent: TypeAlias = RouteDecided | AvailabilityChanged
TelemetryEvent: TypeAlias = (
    CallStarted | CallCompleted | CallFailed | ToolIdStoreFailed | RoutingEvent
)


class TelemetrySink(Protocol):
    """Receives the telemetry events of each attempt (``llm.call_started``, ``completed``,
    ``failed``, routing and store events); ``LoggingSink``, ``ListSink`` and
    ``OpenTelemetrySink`` are provided."""

    def emit(self, event: TelemetryEvent) -> None:
        """Receive one event. Synchronous and cheap: it runs on the call's own task."""
        ...


class NullSink:
    """Drops everything; the default. With it the telemetry stage steps out of the way."""

    __slots__ = ()

    def emit(self, event: TelemetryEvent) -> None:
        pass

    def __repr__(self) -> str:
        return "NullSink()"


NULL_SINK = NullSink()


@checked_init
class LoggingSink:
    """One log record per event, its fields in the record (``extra``) for structured handlers:
    ``record.event`` is the event name, ``record.request_id``, ``record.usage`` and so on."""

    def __init__(self, logger: str | logging.Logger = "metis.telemetry", level: int = logging.INFO):
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.level = level

    def emit(self, event: TelemetryEvent) -> None:
        if not self.logger.isEnabledFor(self.level):
            return
        self.logger.log(self.level, "%s", _describe(event), extra=event.to_dict())

    def __repr__(self) -> str:
        return f"LoggingSink({self.logger.name!r}, {logging.getLevelName(self.level)})"


def _describe(event: TelemetryEvent) -> str:
    if isinstance(event, RouteDecided):
        steps = "; ".join(f"{model} {outcome} ({reason})" for model, outcome, reason in event.steps)
        return f"{event.name} {event.route} {event.request_id}: {event.served_by}: {steps}"
    if isinstance(event, AvailabilityChanged):
        return (
            f"{event.name} {event.key}: {event.old_state} -> {event.new_state} "
            f"({event.reason}, {event.failures} failures, cooldown {event.cooldown_seconds:g} s)"
        )
    head = (
        f"{event.name} {event.provider} {event.wire_model} {event.request_id} "
        f"retry {event.retry_count}"
    )
    if isinstance(event, CallStarted):
        return head
    if isinstance(event, ToolIdStoreFailed):
        return f"{head}: tool-id store {event.operation} failed: {event.error_message}"
    if isinstance(event, CallCompleted):
        usage = event.usage
        return (
            f"{head}: {event.stop_reason.kind.value} in {event.latency_ms} ms, "
            f"{usage.total_input_tokens} in / {usage.output_tokens} out"
        )
    return f"{head}: {event.error_class} after {event.latency_ms} ms: {event.error_message}"


class ListSink:
    """Keeps every event, in order; for tests."""

    def __init__(self) -> None:
        self.events: list[TelemetryEvent] = []

    def emit(self, event: TelemetryEvent) -> None:
        self.events.append(event)

    def names(self) -> list[str]:
        return [e.name for e in self.events]

    def clear(self) -> None:
        self.events.clear()

    def __repr__(self) -> str:
        return f"ListSink({len(self.events)} events)"


class MultiSink:
    """Hands each event to every sink in turn. A sink that raises does not keep the event
    from the others; the first such error is raised once they all had it."""

    def __init__(self, *sinks: TelemetrySink) -> None:
        self.sinks = sinks

    def emit(self, event: TelemetryEvent) -> None:
        failure: Exception | None = None
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        return f"MultiSink({', '.join(map(repr, self.sinks))})"


# The OpenTelemetry sink lives in its own module; imported last, as it builds on the above.
from metis.telemetry.otel import OpenTelemetrySink  # noqa: E402
