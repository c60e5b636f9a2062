"""One embedding request, sent the way every request to a provider goes: retried by the
retry stage's policy (metis.errors.RETRY_POLICY, a provider's Retry-After, the deadline),
each attempt through the auth flow and the transport (``Provider.fetch``), one
``llm.call_started`` and one completed-or-failed bus event per attempt (docs/engine.md)."""

from __future__ import annotations

import contextlib
import time

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from metis.errors import AdapterError, ErrorClass, ProtocolError, redact
from metis.model.response import StopReason, TokenUsage
from metis.pipeline.call import Call
from metis.pipeline.endpoint import Endpoint
from metis.pipeline.provider import Provider
from metis.pipeline.request import WireRequest
from metis.stages.control.attempt_record import call_identity
from metis.stages.control.retry import StopAtDeadline, backoff
from metis.telemetry import (
    CallCompleted,
    CallFailed,
    CallStarted,
    NullSink,
    TelemetryEvent,
    TelemetrySink,
)
from metis.wire.embeddings import EmbedBatch, EmbedCodec, Embedded

_EMBEDDED = StopReason(kind="end_turn", raw="embedded")


async def send_batch(
    provider: Provider,
    codec: EmbedCodec,
    endpoint: Endpoint,
    batch: EmbedBatch,
    call: Call,
    max_retries: int,
    sink: TelemetrySink,
) -> Embedded:
    """The vectors of ``batch``, or the classified error of its last attempt."""
    request = WireRequest(
        endpoint.url(stream=False, model=batch.model),
        codec.encode(batch),
        endpoint.request_headers(),
    ).serialized()
    retrying = AsyncRetrying(
        stop=stop_after_attempt(1 + max_retries) | StopAtDeadline(call),
        wait=backoff,
        retry=retry_if_exception(lambda e: isinstance(e, AdapterError) and e.retryable),
        sleep=call.cancel.sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            call.attempt = attempt.retry_state.attempt_number - 1
            return await _attempt(provider, codec, request, batch, call, sink)
    raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover


async def _attempt(
    provider: Provider,
    codec: EmbedCodec,
    request: WireRequest,
    batch: EmbedBatch,
    call: Call,
    sink: TelemetrySink,
) -> Embedded:
    observed = type(sink) is not NullSink
    started = time.monotonic()
    if observed:
        _emit(sink, CallStarted(**call_identity(call, call.attempt), stream=False))
    try:
        fetched = await provider.fetch(request, call, codec.error_from_http)
        embedded = codec.decode(fetched.body, fetched.headers, batch)
        check_sizes(embedded.vectors, batch.dimensions, "in one answer")
    except BaseException as exc:
        if isinstance(exc, AdapterError):
            exc.provider = exc.provider or call.provider
            exc.request_id = exc.request_id or call.request_id
        if observed:
            _emit(sink, _failed(call, started, exc, provider.services.secrets))
        raise
    if observed:
        usage = TokenUsage(input_tokens=embedded.input_tokens or 0)
        _emit(
            sink,
            CallCompleted(
                **call_identity(call, call.attempt),
                latency_ms=_ms(started),
                usage=usage,
                stop_reason=_EMBEDDED,
                message_id=None,
                response_model=embedded.model,
            ),
        )
    return embedded


def check_sizes(vectors: list[list[float]], dimensions: int | None, where: str) -> None:
    """A ProtocolError for vectors of two lengths, or of another length than was asked."""
    sizes = list(dict.fromkeys(len(vector) for vector in vectors))
    if dimensions is not None and sizes and sizes != [dimensions]:
        wrong = next(size for size in sizes if size != dimensions)
        raise ProtocolError(f"embeddings: {dimensions} dimensions were asked, a vector has {wrong}")
    if len(sizes) > 1:
        raise ProtocolError(f"embeddings: vectors of {sizes[0]} and {sizes[1]} numbers {where}")


def _failed(call: Call, started: float, exc: BaseException, secrets: tuple[str, ...]) -> CallFailed:
    if isinstance(exc, AdapterError):
        kind, status, retryable = exc.error_class.value, exc.provider_status, exc.retryable
    else:
        kind, status, retryable = ErrorClass.CANCELLED.value, None, False
    return CallFailed(
        **call_identity(call, call.attempt),
        latency_ms=_ms(started),
        error_class=kind,
        error_message=redact(str(exc), *secrets, *call.secrets),
        provider_status=status,
        retryable=retryable,
    )


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _emit(sink: TelemetrySink, event: TelemetryEvent) -> None:
    with contextlib.suppress(Exception):  # a failing sink never fails the call
        sink.emit(event)
