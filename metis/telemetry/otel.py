"""OpenTelemetry spans for metis's telemetry events, after the GenAI semantic conventions.

``OpenTelemetrySink`` is importable from :mod:`metis.telemetry` and :mod:`metis`; it needs the
``otel`` extra (``pip install 'metis[otel]'``).
"""

from __future__ import annotations

import threading
from typing import Any

from metis.core.options import checked_init
from metis.core.version import VERSION
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.telemetry.events import (
    AvailabilityChanged,
    CallCompleted,
    CallFailed,
    CallStarted,
    RouteDecided,
    RoutingEvent,
    SharedStateChanged,
    TelemetryEvent,
    ToolIdStoreFailed,
)


@checked_init
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
        self._trace = trace
        self._tracer = trace.get_tracer(tracer_name, VERSION, tracer_provider=tracer_provider)
        self._open: dict[tuple[str, int], list[Any]] = {}
        self._lock = threading.Lock()

    def emit(self, event: TelemetryEvent) -> None:
        """Open, annotate or close the attempt's span as the event says."""
        if isinstance(event, CallStarted):
            self._start(event)
        elif isinstance(event, ToolIdStoreFailed):
            self._store_failed(event)
        elif isinstance(event, RouteDecided | AvailabilityChanged | SharedStateChanged):
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
    if isinstance(event, SharedStateChanged):
        return {
            "metis.route.name": event.route,
            "metis.shared_state.store": event.store,
            "metis.shared_state.state": event.state,
            "metis.shared_state.reason": event.reason,
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
        "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,  # within output_tokens
    }


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
