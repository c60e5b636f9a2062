"""telemetry: llm.call_started / completed / failed per attempt (docs/contract.md §2)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, cast

import anyio
import pytest

from metis.errors import ConfigError, OverloadedError, RateLimitError
from metis.model import (
    MessageComplete,
    MessageStart,
    StopKind,
    StopReason,
    StreamEvent,
    TextBlock,
    TextDelta,
    TokenUsage,
)
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.stages.control.telemetry import Telemetry
from metis.telemetry import (
    NULL_SINK,
    CallCompleted,
    CallFailed,
    CallStarted,
    ListSink,
    LoggingSink,
    MultiSink,
    OpenTelemetrySink,
    TelemetryEvent,
    TelemetrySink,
)

from ..helpers import bound, make_call

WIRE = WireRequest(url="http://test/v1", body={"model": "claude-x"}, stream=True)
USAGE = TokenUsage(
    input_tokens=10, output_tokens=5, cached_input_tokens=100, cache_creation_input_tokens=20
)

Inner = Callable[[Any, Any], AsyncIterator[StreamEvent]]


def call_at(attempt: int = 0) -> Call:
    call = make_call(model="anthropic:claude-x", session_id="s1")
    call.attempt = attempt
    return call


def traced(sink: TelemetrySink | None) -> Telemetry:
    """The stage as an adapter whose sink is ``sink`` builds it."""
    return bound(Telemetry(), telemetry=sink)


def reply(text: str = "Hi", kind: StopKind = StopKind.END_TURN) -> list[StreamEvent]:
    return [
        MessageStart("msg_1", "claude-x-2025"),
        TextDelta(0, text),
        MessageComplete(
            [TextBlock(text=text)],
            StopReason(kind=kind, raw=kind.value if kind is StopKind.END_TURN else None),
            USAGE,
            "msg_1",
            "claude-x-2025",
        ),
    ]


def script(
    events: list[StreamEvent],
    raise_after: BaseException | None = None,
    delay: float = 0.0,
    hang: anyio.Event | None = None,
) -> Inner:
    """A fake inner stack: yields ``events`` (after ``delay``), then raises ``raise_after``,
    or, with ``hang``, sets it and waits forever after the first event."""

    async def inner(request: Any, call: Any) -> AsyncIterator[StreamEvent]:
        if delay:
            await anyio.sleep(delay)
        for i, event in enumerate(events):
            yield event
            if hang is not None and i == 0:
                hang.set()
                await anyio.sleep_forever()
        if raise_after is not None:
            raise raise_after

    return inner


def opened(stage: Telemetry, call: Any, inner: Inner) -> AsyncGenerator[StreamEvent, None]:
    return cast(AsyncGenerator[StreamEvent, None], stage(WIRE, call, inner))


async def run(stage: Telemetry, call: Any, inner: Inner) -> list[StreamEvent]:
    return [e async for e in stage(WIRE, call, inner)]


def names_and_retries(sink: ListSink) -> list[tuple[str, int]]:
    return [(e.name, e.retry_count) for e in sink.events]


# The stage -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_started_then_completed_with_usage_stop_and_latency() -> None:
    sink = ListSink()
    events = reply()
    out = await run(traced(sink), call_at(), script(events, delay=0.02))

    assert len(out) == len(events) and all(a is b for a, b in zip(out, events, strict=True))
    assert sink.names() == ["llm.call_started", "llm.call_completed"]
    started, completed = sink.events
    assert isinstance(started, CallStarted) and isinstance(completed, CallCompleted)
    assert started == CallStarted(
        request_id="req_1",
        session_id="s1",
        provider="anthropic",
        model="anthropic:claude-x",
        wire_model="claude-x",
        retry_count=0,
        stream=True,
        timestamp=started.timestamp,
    )
    assert completed.usage is USAGE
    assert completed.stop_reason == StopReason(kind=StopKind.END_TURN, raw="end_turn")
    assert completed.message_id == "msg_1"
    assert completed.response_model == "claude-x-2025"
    assert completed.retry_count == 0 and completed.request_id == "req_1"
    assert 15 <= completed.latency_ms < 5_000
    assert completed.timestamp >= started.timestamp


@pytest.mark.anyio
async def test_failure_mid_stream_reports_partial_usage_and_reraises_the_same_error() -> None:
    sink = ListSink()
    error = OverloadedError("Overloaded", provider_status=529, provider="anthropic")
    events = reply(
        kind=StopKind.ERROR
    )  # normalize ends a broken message first (docs/contract.md §4)
    out: list[StreamEvent] = []
    with pytest.raises(OverloadedError) as caught:
        async for event in traced(sink)(WIRE, call_at(), script(events, error)):
            out.append(event)

    assert caught.value is error
    assert all(a is b for a, b in zip(out, events, strict=True)) and len(out) == 3
    assert sink.names() == ["llm.call_started", "llm.call_failed"]
    failed = sink.events[1]
    assert isinstance(failed, CallFailed)
    assert failed.error_class == "overloaded"
    assert failed.error_message == "Overloaded"
    assert failed.provider_status == 529
    assert failed.retryable is True
    assert failed.usage is USAGE
    assert failed.retry_count == 0 and failed.latency_ms >= 0


@pytest.mark.anyio
async def test_failure_before_any_message_has_no_usage() -> None:
    sink = ListSink()
    error = RateLimitError("slow down", provider_status=429, retry_after_seconds=1.0)
    with pytest.raises(RateLimitError):
        await run(traced(sink), call_at(), script([], error))
    failed = sink.events[-1]
    assert isinstance(failed, CallFailed)
    assert (failed.error_class, failed.usage, failed.provider_status) == ("rate_limit", None, 429)


@pytest.mark.anyio
async def test_a_bug_below_is_reported_as_other_and_reraised() -> None:
    sink = ListSink()
    bug = KeyError("choices")
    with pytest.raises(KeyError) as caught:
        await run(traced(sink), call_at(), script(reply()[:1], bug))
    assert caught.value is bug
    failed = sink.events[-1]
    assert isinstance(failed, CallFailed)
    assert failed.error_class == "other" and "KeyError" in failed.error_message


@pytest.mark.anyio
async def test_retry_count_comes_from_call_attempt() -> None:
    sink = ListSink()
    await run(traced(sink), call_at(attempt=2), script(reply()))
    assert names_and_retries(sink) == [("llm.call_started", 2), ("llm.call_completed", 2)]


@pytest.mark.anyio
async def test_a_stream_cancelled_by_the_adapter_completes_with_its_stop_reason() -> None:
    sink = ListSink()
    await run(traced(sink), call_at(), script(reply(kind=StopKind.CANCELLED)))
    completed = sink.events[-1]
    assert isinstance(completed, CallCompleted)
    assert completed.stop_reason.kind is StopKind.CANCELLED


@pytest.mark.anyio
async def test_a_raising_sink_does_not_break_the_call_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def emit(self, event: TelemetryEvent) -> None:
            raise RuntimeError("bus is down")

    stage = traced(Broken())
    events = reply()
    with caplog.at_level(logging.WARNING, logger="metis"):
        first = await run(stage, call_at(), script(events))
        second = await run(stage, call_at(), script(events))

    assert all(a is b for a, b in zip(first, events, strict=True)) and len(first) == 3
    assert len(second) == 3
    records = [
        r for r in caplog.records if getattr(r, "event", None) == "metis.telemetry_sink_failed"
    ]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING and records[0].exc_info is not None


@pytest.mark.anyio
async def test_cancelling_the_callers_task_reports_cancelled_and_propagates() -> None:
    sink = ListSink()
    entered = anyio.Event()
    events = reply()
    out: list[StreamEvent] = []

    async def consume(scope: anyio.CancelScope) -> None:
        with scope:
            async for event in traced(sink)(WIRE, call_at(), script(events, hang=entered)):
                out.append(event)

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume, scope)
        await entered.wait()
        scope.cancel()

    assert scope.cancelled_caught
    assert out == events[:1]
    assert sink.names() == ["llm.call_started", "llm.call_failed"]
    failed = sink.events[1]
    assert isinstance(failed, CallFailed)
    assert failed.error_class == "cancelled" and failed.retryable is False
    assert failed.usage is None


@pytest.mark.anyio
async def test_closing_the_stream_early_reports_cancelled() -> None:
    sink = ListSink()
    async with aclosing(opened(traced(sink), call_at(), script(reply()))) as stream:
        async for _event in stream:
            break
    assert sink.names() == ["llm.call_started", "llm.call_failed"]
    failed = sink.events[1]
    assert isinstance(failed, CallFailed) and failed.error_class == "cancelled"


@pytest.mark.anyio
async def test_closing_the_stream_after_its_message_reports_completed() -> None:
    sink = ListSink()
    async with aclosing(opened(traced(sink), call_at(), script(reply()))) as stream:
        async for event in stream:
            if isinstance(event, MessageComplete):
                break
    assert sink.names() == ["llm.call_started", "llm.call_completed"]


@pytest.mark.anyio
async def test_with_no_sink_the_stage_opens_no_watch_and_costs_nothing_per_event() -> None:
    for sink in (None, NULL_SINK):
        request, watch = await traced(sink).open(WIRE, call_at())
        assert request is WIRE and watch is None  # the engine's loop has nothing to call
    _, watch = await traced(ListSink()).open(WIRE, call_at())
    assert watch is not None


@pytest.mark.anyio
async def test_seed_000_9_3_three_attempts_two_failed_one_completed() -> None:
    """529, 529, then 200: three llm.call_started, llm.call_failed with retry_count 0 and 1,
    one llm.call_completed (docs/contract.md §2). The retry loop is written out by hand here: the
    stage sits inside the retry stage and sees each attempt once."""
    sink = ListSink()
    call = call_at()
    stage = traced(sink)
    attempts = [
        script([], OverloadedError("Overloaded", provider_status=529)),
        script([], OverloadedError("Overloaded", provider_status=529)),
        script(reply()),
    ]
    out: list[StreamEvent] = []
    for attempt, inner in enumerate(attempts):
        call.attempt = attempt
        try:
            out = await run(stage, call, inner)
            break
        except OverloadedError:
            continue

    assert [e.type for e in out] == ["message.start", "text.delta", "message.complete"]
    assert names_and_retries(sink) == [
        ("llm.call_started", 0),
        ("llm.call_failed", 0),
        ("llm.call_started", 1),
        ("llm.call_failed", 1),
        ("llm.call_started", 2),
        ("llm.call_completed", 2),
    ]
    failures = [e for e in sink.events if isinstance(e, CallFailed)]
    assert {(e.error_class, e.provider_status, e.retryable) for e in failures} == {
        ("overloaded", 529, True)
    }


def test_the_stage_fits_between_encode_and_normalize() -> None:
    sig = Telemetry.signature()
    assert (sig.request_in, sig.request_out) == (WireRequest, WireRequest)
    assert (sig.items_in, sig.items_out) == (StreamEvent, StreamEvent)


# Events and sinks ------------------------------------------------------------------------


def _completed() -> CallCompleted:
    return CallCompleted(
        request_id="req_1",
        session_id=None,
        provider="openai",
        model="openai:gpt-4o",
        wire_model="gpt-4o",
        retry_count=1,
        timestamp=1_700_000_000.5,
        latency_ms=1234,
        usage=USAGE,
        stop_reason=StopReason(kind=StopKind.TOOL_USE, raw="tool_calls"),
        message_id="chatcmpl-1",
    )


def test_events_are_frozen_and_serialize_to_json() -> None:
    event = _completed()
    with pytest.raises(AttributeError):
        event.latency_ms = 1  # type: ignore[misc]
    data = json.loads(json.dumps(event.to_dict()))
    assert data["event"] == "llm.call_completed"
    assert data["usage"]["cached_input_tokens"] == 100
    assert data["stop_reason"] == {"kind": "tool_use", "raw": "tool_calls", "sequence": None}
    assert data["retry_count"] == 1 and data["session_id"] is None
    assert CallStarted.name == "llm.call_started" and CallFailed.name == "llm.call_failed"


def test_logging_sink_writes_one_structured_record(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="metis.telemetry"):
        LoggingSink().emit(_completed())
    (record,) = caplog.records
    assert record.name == "metis.telemetry" and record.levelno == logging.INFO
    assert record.event == "llm.call_completed"  # type: ignore[attr-defined]
    assert record.request_id == "req_1"  # type: ignore[attr-defined]
    assert record.latency_ms == 1234  # type: ignore[attr-defined]
    assert "llm.call_completed openai gpt-4o req_1 retry 1" in record.getMessage()


def test_logging_sink_is_silent_below_its_level(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="metis.telemetry"):
        LoggingSink().emit(_completed())
    assert caplog.records == []


def test_multi_sink_reaches_every_sink_then_raises_the_first_failure() -> None:
    class Broken:
        def emit(self, event: TelemetryEvent) -> None:
            raise RuntimeError("down")

    a, b = ListSink(), ListSink()
    with pytest.raises(RuntimeError, match="down"):
        MultiSink(a, Broken(), b).emit(_completed())
    assert a.names() == b.names() == ["llm.call_completed"]


# OpenTelemetry -----------------------------------------------------------------------------


def test_otel_sink_says_how_to_install_when_opentelemetry_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ImportError, match=r"pip install 'metis\[otel\]'"):
        OpenTelemetrySink()


@pytest.mark.anyio
async def test_otel_sink_makes_one_span_per_attempt() -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    from opentelemetry.trace import SpanKind, StatusCode

    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    sink = MultiSink(OpenTelemetrySink(provider), ListSink())

    call = call_at()
    stage = traced(sink)
    call.attempt = 0
    with pytest.raises(OverloadedError):
        await run(stage, call, script([], OverloadedError("Overloaded", provider_status=529)))
    call.attempt = 1
    await run(stage, call, script(reply(), delay=0.01))

    failed, completed = exporter.get_finished_spans()
    for span in (failed, completed):
        assert span.name == "chat claude-x"
        assert span.kind is SpanKind.CLIENT
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
        attrs = span.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == attrs["metis.provider"] == "anthropic"
        assert "gen_ai.system" not in attrs  # the name before semantic conventions 1.37
        assert attrs["gen_ai.request.model"] == "claude-x"
        assert attrs["gen_ai.request.stream"] is True
        assert attrs["metis.request_id"] == "req_1"
        assert attrs["metis.session_id"] == attrs["gen_ai.conversation.id"] == "s1"

    assert failed.attributes["metis.retry_count"] == 0
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "Overloaded"
    assert failed.attributes["error.type"] == "overloaded"
    assert failed.attributes["http.response.status_code"] == 529
    assert "gen_ai.usage.input_tokens" not in failed.attributes
    assert tuple(failed.attributes["gen_ai.response.finish_reasons"]) == ("error",)

    assert completed.attributes["metis.retry_count"] == 1
    assert completed.status.status_code is StatusCode.UNSET
    assert "error.type" not in completed.attributes
    assert completed.attributes["gen_ai.response.id"] == "msg_1"
    assert completed.attributes["gen_ai.response.model"] == "claude-x-2025"
    assert tuple(completed.attributes["gen_ai.response.finish_reasons"]) == ("end_turn",)
    assert completed.attributes["gen_ai.usage.input_tokens"] == 130  # cached included
    assert completed.attributes["gen_ai.usage.output_tokens"] == 5
    assert completed.attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert completed.attributes["gen_ai.usage.cache_write.input_tokens"] == 20  # the 2026 name
    assert "gen_ai.usage.cache_creation.input_tokens" not in completed.attributes
    assert 0 <= completed.attributes["gen_ai.response.time_to_first_chunk"] < 5  # seconds
    assert completed.end_time - completed.start_time >= 5_000_000  # the 10 ms delay, roughly


def test_otel_names_providers_by_the_conventions_well_known_values() -> None:
    from metis.telemetry.otel import OTEL_PROVIDER_NAMES, _finish_reason, _span_start_attributes

    started = CallStarted(
        request_id="r", provider="gemini", model="gemini:g", wire_model="g", session_id=None,
        timestamp=0.0, retry_count=0, stream=True,
    )  # fmt: skip
    attrs = _span_start_attributes(started)
    assert attrs["gen_ai.provider.name"] == "gcp.gemini" and attrs["metis.provider"] == "gemini"
    assert "gen_ai.conversation.id" not in attrs  # never made up without a session
    assert OTEL_PROVIDER_NAMES["mistral"] == "mistral_ai"
    assert _finish_reason(StopReason(kind=StopKind.CANCELLED, raw=None)) == "error"
    assert _finish_reason(StopReason(kind=StopKind.TOOL_USE, raw="tool_use")) == "tool_use"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: MultiSink([ListSink()]), r"MultiSink\(a, b\), not MultiSink\(\[a, b\]\)"),
        (lambda: MultiSink("logs"), "has an emit\\(event\\) method, got str 'logs'"),
        (lambda: LoggingSink(level="loud"), "level is a logging level .* got str 'loud'"),
        (lambda: LoggingSink(level=True), "level is a logging level .* got bool True"),
        (lambda: LoggingSink(logger=5), "logger is a logger's name or a logging.Logger"),
    ],
)
def test_a_sink_made_of_what_could_receive_no_event_is_refused(make: Any, said: str) -> None:
    """Each was taken, to fail at the first event (``'list' object has no attribute 'emit'``,
    a level of 'loud' as logging's ``TypeError``), or to log nothing."""
    with pytest.raises(ConfigError, match=said):
        make()


def test_a_logging_sinks_level_may_be_named() -> None:
    assert LoggingSink(level="debug").level == logging.DEBUG
    assert LoggingSink(level=logging.WARNING).level == logging.WARNING
