"""telemetry: the bus events of each attempt, to the adapter's sink (docs/contract.md §2).

It sits inside the retry stage, so every attempt passes through it once: ``llm.call_started``
before the attempt goes inward, then exactly one of

* ``llm.call_completed`` when the stream ended after its ``message.complete`` (whatever the
  stop reason, ``cancelled`` included: ``Adapter.cancel`` ends a stream with a message);
* ``llm.call_failed`` when an error came out of the stack (classified by its ``error_class``,
  with the partial usage of a ``message.complete`` that came first), or when the caller's task
  was cancelled or the caller closed the stream before its message was complete (both
  ``error_class="cancelled"``). The error or cancellation goes on outward unchanged.

``retry_count`` is ``call.attempt``, which the retry stage sets. Events pass through untouched
at the cost of one ``isinstance`` each; with the default ``NullSink`` the stage hands back the
inner stream itself and costs nothing. A sink that raises is logged once and ignored.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.telemetry.sink import NULL_SINK, NullSink, TelemetrySink

if TYPE_CHECKING:
    from metis.telemetry.events import TelemetryEvent

log = logging.getLogger("metis")


class Telemetry(EventHook[WireRequest]):
    """A per-event hook inside ``retry``: opened once per attempt, it watches that attempt's
    events in the engine's one loop. With the ``NullSink`` it opens no watch at all."""

    name = "telemetry"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._sink_failed = False  # warn about a failing sink once, not per event
        self._sink: TelemetrySink = NULL_SINK
        self._secrets: tuple[str, ...] = ()

    def bind(self, services: StageServices) -> None:
        self._sink = services.telemetry
        self._secrets = services.secrets

    async def open(self, request: WireRequest, call: Call) -> tuple[WireRequest, Watch | None]:
        sink = self._sink
        if type(sink) is NullSink:
            return request, None
        from metis.stages.control.attempt_record import AttemptRecord  # events load with a sink

        return request, AttemptRecord(self._emit, sink, call, self._secrets, request.stream)

    def _emit(self, sink: TelemetrySink, call: Call, event: TelemetryEvent) -> None:
        try:
            sink.emit(event)
        except Exception:
            if not self._sink_failed:
                self._sink_failed = True
                log.warning(
                    "telemetry sink %r failed on %s; its failures are ignored from now on",
                    sink,
                    event.name,
                    exc_info=True,
                    extra={
                        "event": "metis.telemetry_sink_failed",
                        "request_id": call.request_id,
                        "sink": repr(sink),
                    },
                )
