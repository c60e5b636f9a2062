"""Routing decisions and availability changes on the bus: logged, and on OpenTelemetry spans."""

from __future__ import annotations

import logging
import re

import anyio
import pytest

from metis.routing import Router
from metis.telemetry import (
    AvailabilityChanged,
    ListSink,
    LoggingSink,
    MultiSink,
    OpenTelemetrySink,
    RouteDecided,
)
from metis.testing.emulator import Emulator

from ..routing_helpers import MODELS, ask, emulated

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # wire formats; sockets: test_transport and others


@pytest.mark.anyio
async def test_decisions_and_state_changes_become_span_attributes(emulator: Emulator) -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    route = Router(
        [MODELS["anthropic"], MODELS["gemini"]],
        adapters=emulated(emulator),
        max_retries=0,
        telemetry=OpenTelemetrySink(provider),
    )
    emulator.push_fault("overloaded", provider="anthropic")
    with tracer.start_as_current_span("handle request"), anyio.fail_after(20):
        await route.complete(ask())
    # no current span: the event gets a short span of its own
    emulator.push_fault("overloaded", provider="gemini")
    with pytest.raises(Exception):  # noqa: B017 - anthropic cools down, gemini overloaded
        await route.complete(ask())

    spans = {span.name: span for span in exporter.get_finished_spans()}
    attributes = spans["handle request"].attributes
    assert attributes["metis.route.served_by"] == MODELS["gemini"]
    assert attributes["metis.route.failed"] == (f"{MODELS['anthropic']}: overloaded: Overloaded",)
    assert attributes["metis.availability.key"] == MODELS["anthropic"]
    assert attributes["metis.availability.state"] == "cooling_down"
    events = [e.name for e in spans["handle request"].events]
    assert events == ["metis.availability_changed", "metis.route_decided"]
    alone = spans["metis.route_decided"].attributes
    assert alone["metis.route.served_by"] == ""
    (skipped,) = alone["metis.route.skipped"]
    # the wait left is read off the clock: 10.0 s, less by what a busy machine took since
    found = re.fullmatch(
        rf"{re.escape(MODELS['anthropic'])}: cooling down \((\d+\.\d) s left\)", skipped
    )
    assert found is not None and 5.0 <= float(found.group(1)) <= 10.0


@pytest.mark.anyio
async def test_the_logging_sink_says_who_served_and_why(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="metis.telemetry")
    sink = ListSink()
    route = Router(
        [MODELS["openai"], MODELS["anthropic"]],
        adapters=emulated(emulator),
        max_retries=0,
        telemetry=MultiSink(LoggingSink(), sink),
    )
    emulator.push_fault("server_error", provider="openai")
    with anyio.fail_after(20):
        await route.complete(ask())
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("metis.availability_changed openai:gpt-4o: available -> cooling_down")
        for m in messages
    )
    decided = next(r for r in caplog.records if getattr(r, "event", "") == "metis.route_decided")
    assert decided.served_by == MODELS["anthropic"]  # type: ignore[attr-defined]
    assert "openai:gpt-4o failed (server_error" in decided.getMessage()
    assert [type(e) for e in sink.events] == [AvailabilityChanged, RouteDecided]
