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
import time
from typing import Any

from metis.errors import AdapterError, ErrorClass, redact
from metis.model.events import MessageComplete, MessageStart, StreamEvent
from metis.model.response import StopKind
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.telemetry import (
    NULL_SINK,
    CallCompleted,
    CallFailed,
    CallStarted,
    NullSink,
    TelemetryEvent,
    TelemetrySink,
)

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
        watch = _Attempt(self, sink, call)
        self._emit(
            sink, call, CallStarted(**call_identity(call, watch.retry_count), stream=request.stream)
        )
        return request, watch

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


class _Attempt(Watch):
    """One attempt's record: when its first event came, its ``message.complete``, and the
    one ending it reports."""

    __slots__ = ("call", "complete", "first_ms", "retry_count", "sink", "stage", "started")
    kinds = (MessageStart, MessageComplete)  # the first event (rule 1), and the last

    def __init__(self, stage: Telemetry, sink: TelemetrySink, call: Call) -> None:
        self.stage, self.sink, self.call = stage, sink, call
        self.retry_count = call.attempt
        self.started = time.monotonic()
        self.first_ms: int | None = None  # time to the first event: time to first chunk
        self.complete: MessageComplete | None = None

    def event(self, event: StreamEvent) -> StreamEvent:
        if self.first_ms is None:
            self.first_ms = _ms_since(self.started)
        if event.__class__ is MessageComplete:
            self.complete = event
        return event

    def close(self, error: BaseException | None) -> BaseException | None:
        call, complete, latency_ms = self.call, self.complete, _ms_since(self.started)
        # GeneratorExit (the caller closed the stream) and the async library's cancellation
        # (asyncio.CancelledError, trio.Cancelled) are not Exceptions.
        if error is None or (not isinstance(error, Exception) and _answered(complete)):
            ended = _completed(call, self.retry_count, latency_ms, complete, self.first_ms)
        else:
            secrets = (*self.stage._secrets, *call.secrets)
            ended = _failed(call, self.retry_count, latency_ms, error, complete, secrets)
        self.stage._emit(self.sink, call, ended)
        return None


def _answered(complete: MessageComplete | None) -> bool:
    """The message arrived whole: closing or cancelling after it loses nothing."""
    return complete is not None and complete.stop_reason.kind is not StopKind.ERROR


def _completed(
    call: Call,
    retry_count: int,
    latency_ms: int,
    complete: MessageComplete | None,
    first_ms: int | None = None,
) -> TelemetryEvent:
    if complete is None:  # the stack ended without a message: report it as what it is
        return CallFailed(
            **call_identity(call, retry_count),
            latency_ms=latency_ms,
            error_class=ErrorClass.OTHER.value,
            error_message="the stream ended without a message.complete",
            provider_status=None,
            retryable=False,
        )
    return CallCompleted(
        **call_identity(call, retry_count),
        latency_ms=latency_ms,
        usage=complete.usage,
        stop_reason=complete.stop_reason,
        message_id=complete.message_id,
        response_model=complete.model,
        time_to_first_chunk_ms=first_ms,
    )


def _failed(
    call: Call,
    retry_count: int,
    latency_ms: int,
    exc: BaseException,
    complete: MessageComplete | None,
    secrets: tuple[str, ...],
) -> CallFailed:
    if isinstance(exc, AdapterError):
        error_class = exc.error_class.value
        message = redact(exc.message, *secrets)
        status = exc.provider_status
        retryable = exc.retryable
    elif isinstance(exc, Exception):  # a bug below us: still one ending per attempt
        error_class = ErrorClass.OTHER.value
        message = redact(f"{type(exc).__name__}: {exc}", *secrets)
        status = None
        retryable = False
    else:
        error_class = ErrorClass.CANCELLED.value
        message = (
            "the caller closed the stream before the message was complete"
            if isinstance(exc, GeneratorExit)
            else "the caller's task was cancelled"
        )
        status = None
        retryable = False
    return CallFailed(
        **call_identity(call, retry_count),
        latency_ms=latency_ms,
        error_class=error_class,
        error_message=message,
        provider_status=status,
        retryable=retryable,
        usage=complete.usage if complete is not None else None,
    )


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def call_identity(call: Call, retry_count: int) -> dict[str, Any]:
    """Which attempt of which call: the fields every bus event starts with."""
    return {
        "request_id": call.request_id,
        "session_id": call.session_id,
        "provider": call.provider,
        "model": call.model,
        "wire_model": call.wire_model,
        "retry_count": retry_count,
        "timestamp": time.time(),
    }
