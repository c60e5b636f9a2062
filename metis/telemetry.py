"""Bus events for each attempt at a call, and the sinks that receive them (docs/contract.md §2).

The canonical stream events go to the caller; these go on a separate channel, the bus:

* ``llm.call_started`` when an attempt begins (one per attempt: a call retried twice has three),
* ``llm.call_completed`` when an attempt ends with a message,
* ``llm.call_failed`` when an attempt ends in an error, a cancellation of the caller's task, or
  a stream the caller closed before its message was complete,
* ``metis.tool_id_store_failed`` when the session's tool-id store could not be read or written
  (the ``tool_ids`` stage emits it; the call goes on with derived ids).

The ``telemetry`` stage (:mod:`metis.stages.telemetry`) emits them, sitting inside the retry
stage so it sees every attempt; ``retry_count`` is the attempt's number of retries before it.
A sink is anything with a synchronous ``emit(event)``; it must be cheap (it runs in the call's
task) and should not raise: the stage logs a failing sink once and carries on.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol, TypeAlias

from metis.model.response import StopKind, StopReason, TokenUsage

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


class OpenTelemetrySink:
    """One OpenTelemetry span per attempt, after the GenAI semantic conventions.

    The span (``chat {wire model}``, kind CLIENT) opens on ``llm.call_started`` and closes on
    ``llm.call_completed`` or ``llm.call_failed``, with the events' own times. Its parent is
    whatever span is current in the task that runs the call. A failed attempt gets status
    ERROR and ``error.type`` set to the error class. Needs ``pip install 'metis[otel]'``.
    """

    def __init__(self, tracer_provider: Any = None, *, tracer_name: str = "metis") -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ImportError(
                "OpenTelemetrySink needs the OpenTelemetry API: pip install 'metis[otel]'"
            ) from exc
        from metis import __version__

        self._trace = trace
        self._tracer = trace.get_tracer(tracer_name, __version__, tracer_provider=tracer_provider)
        self._open: dict[tuple[str, int], list[Any]] = {}
        self._lock = threading.Lock()

    def emit(self, event: TelemetryEvent) -> None:
        if isinstance(event, CallStarted):
            self._start(event)
        elif isinstance(event, ToolIdStoreFailed):
            self._store_failed(event)
        elif isinstance(event, RouteDecided | AvailabilityChanged):
            self._routing(event)
        else:
            self._end(event)

    def _routing(self, event: RoutingEvent) -> None:
        """Routing events become attributes of the span current in the calling task, or of a
        short span of their own when there is none."""
        attributes = _routing_attributes(event)
        current = self._trace.get_current_span()
        if current.is_recording():
            current.set_attributes(attributes)
            current.add_event(event.name, attributes, timestamp=_ns(event.timestamp))
            return
        span = self._tracer.start_span(
            event.name, attributes=attributes, start_time=_ns(event.timestamp)
        )
        span.end(end_time=_ns(event.timestamp))

    def _start(self, event: CallStarted) -> None:
        attributes = _span_start_attributes(event)
        span = self._tracer.start_span(
            f"chat {event.wire_model}",
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(event.timestamp),
        )
        with self._lock:
            self._open.setdefault((event.request_id, event.retry_count), []).append(span)

    def _store_failed(self, event: ToolIdStoreFailed) -> None:
        """An event on the attempt's span while it is open, else a span of its own."""
        attributes = {
            "metis.tool_id_store.operation": event.operation,
            "error.type": event.error_class,
            "metis.error_message": event.error_message,
        }
        with self._lock:
            waiting = self._open.get((event.request_id, event.retry_count))
            span = waiting[0] if waiting else None
        if span is not None:
            span.add_event(event.name, attributes, timestamp=_ns(event.timestamp))
            return
        span = self._tracer.start_span(
            f"metis.tool_id_store {event.operation}",
            attributes={**_span_start_attributes(event), **attributes},
            start_time=_ns(event.timestamp),
        )
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error_message))
        span.end(end_time=_ns(event.timestamp))

    def _end(self, event: CallCompleted | CallFailed) -> None:
        key = (event.request_id, event.retry_count)
        with self._lock:
            waiting = self._open.get(key)
            span = waiting.pop(0) if waiting else None
            if waiting == []:
                del self._open[key]
        if span is None:  # no started event seen: make the span from what this one says
            span = self._tracer.start_span(
                f"chat {event.wire_model}",
                kind=self._trace.SpanKind.CLIENT,
                attributes=_span_start_attributes(event),
                start_time=_ns(event.timestamp - event.latency_ms / 1000),
            )
        if isinstance(event, CallCompleted):
            if event.message_id:
                span.set_attribute("gen_ai.response.id", event.message_id)
            if event.response_model:
                span.set_attribute("gen_ai.response.model", event.response_model)
            stop = event.stop_reason
            span.set_attribute("gen_ai.response.finish_reasons", [_finish_reason(stop)])
            if event.time_to_first_chunk_ms is not None:
                span.set_attribute(
                    "gen_ai.response.time_to_first_chunk", event.time_to_first_chunk_ms / 1000
                )
        else:
            span.set_attribute("gen_ai.response.finish_reasons", ["error"])
            span.set_attribute("error.type", event.error_class)
            if event.provider_status is not None:
                span.set_attribute("http.response.status_code", event.provider_status)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error_message))
        if event.usage is not None:
            span.set_attributes(_usage_attributes(event.usage))
        span.end(end_time=_ns(event.timestamp))

    def __repr__(self) -> str:
        return "OpenTelemetrySink()"


# The GenAI conventions' well-known gen_ai.provider.name values, by stack; a stack not listed
# reports its own name.
OTEL_PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai_responses": "openai",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertex_anthropic": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "bedrock_anthropic": "aws.bedrock",
    "bedrock_mantle": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_responses": "azure.ai.openai",
    "groq": "groq",
    "mistral": "mistral_ai",
    "deepseek": "deepseek",
    "perplexity": "perplexity",
    "xai": "x_ai",
}


def _finish_reason(stop: StopReason) -> str:
    """The provider's own reason; ``error`` where none arrived (cancelled or cut short)."""
    if stop.kind in (StopKind.CANCELLED, StopKind.ERROR):
        return "error"
    return stop.raw or stop.kind.value


def _span_start_attributes(
    event: CallStarted | CallCompleted | CallFailed | ToolIdStoreFailed,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": OTEL_PROVIDER_NAMES.get(event.provider, event.provider),
        "metis.provider": event.provider,
        "gen_ai.request.model": event.wire_model,
        "metis.request_id": event.request_id,
        "metis.retry_count": event.retry_count,
        "metis.model": event.model,
    }
    if isinstance(event, CallStarted):
        attributes["gen_ai.request.stream"] = event.stream
    if event.session_id is not None:
        attributes["metis.session_id"] = event.session_id
        attributes["gen_ai.conversation.id"] = event.session_id
    return attributes


def _routing_attributes(event: RoutingEvent) -> dict[str, Any]:
    if isinstance(event, RouteDecided):
        return {
            "metis.route.name": event.route,
            "metis.route.served_by": event.served_by or "",
            "metis.route.skipped": [f"{m}: {r}" for m, o, r in event.steps if o == "skipped"],
            "metis.route.failed": [f"{m}: {r}" for m, o, r in event.steps if o == "failed"],
            "metis.request_id": event.request_id,
        }
    return {
        "metis.availability.key": event.key,
        "metis.availability.state": event.new_state,
        "metis.availability.previous_state": event.old_state,
        "metis.availability.cooldown_seconds": event.cooldown_seconds,
        "metis.availability.failures": event.failures,
        "metis.availability.reason": event.reason,
    }


def _usage_attributes(usage: TokenUsage) -> dict[str, Any]:
    return {
        "gen_ai.usage.input_tokens": usage.total_input_tokens,  # cached included, per semconv
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_input_tokens,
        "gen_ai.usage.cache_write.input_tokens": usage.cache_creation_input_tokens,
    }


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
