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

Each name is imported from its module on first use, so an adapter with the default sink loads
neither the events nor the other sinks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        [
            "AvailabilityChanged",
            "CallCompleted",
            "CallFailed",
            "CallStarted",
            "RouteDecided",
            "RoutingEvent",
            "SharedStateChanged",
            "TelemetryEvent",
            "ToolIdStoreFailed",
        ],
        "metis.telemetry.events",
    ),
    **dict.fromkeys(["OpenTelemetrySink"], "metis.telemetry.otel"),
    **dict.fromkeys(["ListSink", "LoggingSink", "MultiSink"], "metis.telemetry.sinks"),
    **dict.fromkeys(
        ["NULL_SINK", "NullSink", "TelemetrySink", "default_sink", "set_default_sink"],
        "metis.telemetry.sink",
    ),
}
"""Every public name of ``metis.telemetry``, and the module it is imported from on first use."""

__all__ = sorted(_EXPORTS)


_load, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
if not TYPE_CHECKING:  # to a type checker only the names imported below exist
    __getattr__ = _load


if TYPE_CHECKING:
    from metis.telemetry.events import AvailabilityChanged as AvailabilityChanged
    from metis.telemetry.events import CallCompleted as CallCompleted
    from metis.telemetry.events import CallFailed as CallFailed
    from metis.telemetry.events import CallStarted as CallStarted
    from metis.telemetry.events import RouteDecided as RouteDecided
    from metis.telemetry.events import RoutingEvent as RoutingEvent
    from metis.telemetry.events import SharedStateChanged as SharedStateChanged
    from metis.telemetry.events import TelemetryEvent as TelemetryEvent
    from metis.telemetry.events import ToolIdStoreFailed as ToolIdStoreFailed
    from metis.telemetry.otel import OpenTelemetrySink as OpenTelemetrySink
    from metis.telemetry.sink import NULL_SINK as NULL_SINK
    from metis.telemetry.sink import NullSink as NullSink
    from metis.telemetry.sink import TelemetrySink as TelemetrySink
    from metis.telemetry.sink import default_sink as default_sink
    from metis.telemetry.sink import set_default_sink as set_default_sink
    from metis.telemetry.sinks import ListSink as ListSink
    from metis.telemetry.sinks import LoggingSink as LoggingSink
    from metis.telemetry.sinks import MultiSink as MultiSink
