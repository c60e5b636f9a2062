"""What a sink is, and the default one that drops everything: all an adapter needs of the
bus until a call emits an event (the events and the other sinks load with their first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from metis.telemetry.events import TelemetryEvent


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
        """Drop the event."""

    def __repr__(self) -> str:
        return "NullSink()"


NULL_SINK = NullSink()
