"""The sinks: what receives the bus events (a sink is anything with a synchronous ``emit``)."""

from __future__ import annotations

import logging

from metis.core.options import checked_init
from metis.telemetry.events import (
    AvailabilityChanged,
    CallCompleted,
    CallStarted,
    RouteDecided,
    SharedStateChanged,
    TelemetryEvent,
    ToolIdStoreFailed,
)
from metis.telemetry.sink import NULL_SINK as NULL_SINK
from metis.telemetry.sink import NullSink as NullSink
from metis.telemetry.sink import TelemetrySink as TelemetrySink


@checked_init
class LoggingSink:
    """One log record per event, its fields in the record (``extra``) for structured handlers:
    ``record.event`` is the event name, ``record.request_id``, ``record.usage`` and so on."""

    def __init__(
        self, logger: str | logging.Logger = "metis.telemetry", level: int | str = logging.INFO
    ):
        if not isinstance(logger, str | logging.Logger | logging.LoggerAdapter):
            raise _config_error(
                f"LoggingSink: logger is a logger's name or a logging.Logger, got "
                f"{type(logger).__name__} {logger!r:.60}"
            )
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.level = _level(level)

    def emit(self, event: TelemetryEvent) -> None:
        """Log the event in one line, its fields as the record's extra attributes."""
        if not self.logger.isEnabledFor(self.level):
            return
        self.logger.log(self.level, "%s", _describe(event), extra=event.to_dict())

    def __repr__(self) -> str:
        return f"LoggingSink({self.logger.name!r}, {logging.getLevelName(self.level)})"


def _level(level: object) -> int:
    """A logging level given as a number or a name (``"debug"``, ``"INFO"``), as a number."""
    names = logging.getLevelNamesMapping()
    if isinstance(level, str) and level.upper() in names:
        return names[level.upper()]
    if isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        return level
    known = ", ".join(name for name in names if name not in ("NOTSET", "WARN", "FATAL"))
    raise _config_error(
        f"LoggingSink: level is a logging level (logging.INFO, or one of {known}), got "
        f"{type(level).__name__} {level!r:.60}"
    )


def _config_error(message: str) -> Exception:
    from metis.errors import ConfigError

    return ConfigError(message)


def _describe(event: TelemetryEvent) -> str:
    if isinstance(event, RouteDecided):
        steps = "; ".join(f"{model} {outcome} ({reason})" for model, outcome, reason in event.steps)
        return f"{event.name} {event.route} {event.request_id}: {event.served_by}: {steps}"
    if isinstance(event, SharedStateChanged):
        return f"{event.name} {event.route} {event.store}: {event.state} ({event.reason})"
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
        """Keep the event in :attr:`events`."""
        self.events.append(event)

    def names(self) -> list[str]:
        """The kept events' names, in order (``llm.call_started``, ...)."""
        return [e.name for e in self.events]

    def clear(self) -> None:
        """Forget the kept events."""
        self.events.clear()

    def __repr__(self) -> str:
        return f"ListSink({len(self.events)} events)"


class MultiSink:
    """Hands each event to every sink in turn. A sink that raises does not keep the event
    from the others; the first such error is raised once they all had it."""

    def __init__(self, *sinks: TelemetrySink) -> None:
        for sink in sinks:
            if not callable(getattr(sink, "emit", None)):
                listed = " (give each sink as an argument: MultiSink(a, b), not MultiSink([a, b]))"
                raise _config_error(
                    "MultiSink: a telemetry sink has an emit(event) method, got "
                    f"{type(sink).__name__} {sink!r:.60}"
                    + (listed if isinstance(sink, list | tuple) else "")
                )
        self.sinks = sinks

    def emit(self, event: TelemetryEvent) -> None:
        """Hand the event to every sink, then raise the first error one raised."""
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
