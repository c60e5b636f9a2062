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


_default: list[TelemetrySink] = [NULL_SINK]


def set_default_sink(sink: TelemetrySink | None) -> None:
    """The sink of every adapter, router and embedder made from now on without one of its
    own (None: ``NullSink`` again). The one-line calls and sessions, which make their adapters
    themselves, report to it from their next call: ``set_default_sink(LoggingSink())`` logs
    every attempt of ``metis.complete``, ``OpenTelemetrySink()`` makes its spans."""
    if sink is not None and not callable(getattr(sink, "emit", None)):
        from metis.errors import ConfigError

        raise ConfigError(
            f"a telemetry sink has an emit(event) method (LoggingSink(), OpenTelemetrySink(), "
            f"your own), got {type(sink).__name__}"
        )
    _default[0] = sink or NULL_SINK


def default_sink() -> TelemetrySink:
    """The sink :func:`set_default_sink` set, else ``NULL_SINK``."""
    return _default[0]
