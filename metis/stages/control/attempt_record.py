"""One attempt's bus events, for the ``telemetry`` stage (:mod:`metis.stages.control.telemetry`):
loaded with the first sink that records, so an adapter with the default ``NullSink`` does not
build the event classes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from metis.errors import AdapterError, ErrorClass, redact
from metis.model.events import MessageComplete, MessageStart, StreamEvent
from metis.model.response import StopKind
from metis.pipeline.call import Call
from metis.pipeline.hooks import Watch
from metis.telemetry.events import CallCompleted, CallFailed, CallStarted, TelemetryEvent
from metis.telemetry.sink import TelemetrySink

Emit = Callable[[TelemetrySink, Call, TelemetryEvent], None]
"""How the stage hands an event to its sink (a failing sink is logged once)."""


class AttemptRecord(Watch):
    """One attempt's record: when its first event came, its ``message.complete``, and the
    one ending it reports. Made when the attempt starts, which it reports."""

    __slots__ = (
        "call",
        "complete",
        "emit",
        "first_ms",
        "retry_count",
        "secrets",
        "sink",
        "started",
    )
    kinds = (MessageStart, MessageComplete)  # the first event (rule 1), and the last

    def __init__(
        self,
        emit: Emit,
        sink: TelemetrySink,
        call: Call,
        secrets: tuple[str, ...],
        stream: bool,
    ) -> None:
        self.emit, self.sink, self.call, self.secrets = emit, sink, call, secrets
        self.retry_count = call.attempt
        self.started = time.monotonic()
        self.first_ms: int | None = None  # time to the first event: time to first chunk
        self.complete: MessageComplete | None = None
        emit(sink, call, CallStarted(**call_identity(call, self.retry_count), stream=stream))

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
            secrets = (*self.secrets, *call.secrets)
            ended = _failed(call, self.retry_count, latency_ms, error, complete, secrets)
        self.emit(self.sink, call, ended)
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
