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
from metis.telemetry.otel import OpenTelemetrySink
from metis.telemetry.sinks import (
    NULL_SINK,
    ListSink,
    LoggingSink,
    MultiSink,
    NullSink,
    TelemetrySink,
)

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
    "RoutingEvent",
    "SharedStateChanged",
    "TelemetryEvent",
    "TelemetrySink",
    "ToolIdStoreFailed",
]
