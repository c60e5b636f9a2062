"""The bus events: one record per attempt at a call, and the routing decisions
(docs/contract.md §2; :mod:`metis.telemetry` says when each is emitted)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeAlias

from metis.model.response import StopReason, TokenUsage


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
        """A JSON-ready dict: ``{"event": self.name, ...}`` and each field."""
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
        """A JSON-ready dict: ``{"event": self.name, ...}`` and each field."""
        out: dict[str, Any] = {"event": self.name}
        out.update({f.name: getattr(self, f.name) for f in fields(self)})
        return out


@dataclass(frozen=True, slots=True)
class SharedStateChanged:
    """A router's shared store (``store``: ``availability``, ``buckets`` or ``slots``, in Redis
    say) failed or did not answer in time, so the router went on with this process's own state
    (``state`` ``local``), or it answered again (``state`` ``shared``). ``reason`` says what
    happened (metis.routing.shared_state)."""

    name: ClassVar[str] = "metis.shared_state_changed"
    route: str
    store: str
    state: str
    reason: str
    timestamp: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"event": self.name, ...}`` and each field."""
        out: dict[str, Any] = {"event": self.name}
        out.update({f.name: getattr(self, f.name) for f in fields(self)})
        return out


RoutingEvent: TypeAlias = RouteDecided | AvailabilityChanged | SharedStateChanged
TelemetryEvent: TypeAlias = (
    CallStarted | CallCompleted | CallFailed | ToolIdStoreFailed | RoutingEvent
)
