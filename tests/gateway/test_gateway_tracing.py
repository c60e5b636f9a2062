"""OpenTelemetry at the gateway: a SERVER span per request (HTTP attributes, the caller's
``traceparent`` continued), with the library's client spans, translated or passed through,
as its children; in-memory exporter, emulator upstream."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import pytest

from metis.errors import ConfigError
from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
trace_api = pytest.importorskip("opentelemetry.trace")
export = pytest.importorskip("opentelemetry.sdk.trace.export")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
SAID = [{"role": "user", "content": "Hi"}]


def _traced() -> tuple[Any, Any]:
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    app = create_app(gateway_config(Emulator(), {"opentelemetry": True}, provider))
    return app, exporter


async def test_a_server_span_per_request_with_the_client_spans_under_it() -> None:
    app, exporter = _traced()
    headers = {
        "x-api-key": GATEWAY_KEY,
        "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
        "user-agent": "test-agent",
    }
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        streamed = {"model": "flash", "max_tokens": 50, "messages": SAID, "stream": True}
        answer = await client.post("/v1/messages", json=streamed, headers=headers)
        assert answer.status_code == 200 and answer.headers["x-metis-path"] == "translated"
        passed = {"model": "sonnet", "max_tokens": 50, "messages": SAID}
        answer = await client.post("/v1/messages", json=passed, headers=headers)
        assert answer.status_code == 200 and answer.headers["x-metis-path"] == "pass-through"
        missing = {**passed, "model": "nope"}
        assert (await client.post("/v1/messages", json=missing, headers=headers)).status_code == 404
        await client.get("/health")
    spans = exporter.get_finished_spans()
    servers = [s for s in spans if s.kind == trace_api.SpanKind.SERVER]
    assert [s.name for s in servers] == ["POST /v1/messages"] * 3  # not the health check
    for span in servers:
        assert format(span.context.trace_id, "032x") == TRACE_ID
        assert format(span.parent.span_id, "016x") == PARENT_ID
        assert span.attributes["http.request.method"] == "POST"
        assert span.attributes["url.path"] == "/v1/messages"
        assert span.attributes["user_agent.original"] == "test-agent"
    statuses = [s.attributes["http.response.status_code"] for s in servers]
    assert statuses == [200, 200, 404]
    clients = {s.name: s for s in spans if s.kind == trace_api.SpanKind.CLIENT}
    assert set(clients) == {"chat gemini-2.5-flash", "chat claude-sonnet-4-5"}
    for span, server in zip(clients.values(), servers, strict=False):
        assert span.parent is not None and span.parent.span_id == server.context.span_id
        assert span.attributes["gen_ai.usage.output_tokens"] > 0
    translated = clients["chat gemini-2.5-flash"]
    assert translated.end_time <= servers[0].end_time  # the stream ended inside its request


async def test_no_spans_unless_asked() -> None:
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    app = create_app(gateway_config(Emulator(), {}, provider))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        said = {"model": "sonnet", "max_tokens": 50, "messages": SAID}
        await client.post("/v1/messages", json=said, headers={"x-api-key": GATEWAY_KEY})
    assert exporter.get_finished_spans() == ()


async def test_a_passed_through_call_that_fails_ends_its_client_span_as_failed() -> None:
    exporter, emulator = in_memory.InMemorySpanExporter(), Emulator()
    app = create_app(gateway_config(emulator, {"opentelemetry": True}, _provider(exporter)))
    emulator.push_fault("overloaded", provider="anthropic")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        said = {"model": "sonnet", "max_tokens": 50, "messages": SAID, "stream": True}
        answer = await client.post("/v1/messages", json=said, headers={"x-api-key": GATEWAY_KEY})
    assert answer.status_code == 529
    clients = [s for s in exporter.get_finished_spans() if s.kind == trace_api.SpanKind.CLIENT]
    assert [s.attributes["error.type"] for s in clients] == ["overloaded"]


def _provider(exporter: Any) -> Any:
    provider = sdk_trace.TracerProvider()
    if exporter is not None:
        provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    return provider


async def test_spans_asked_for_with_no_tracer_provider_anywhere_are_said_at_startup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``opentelemetry: true`` with no provider given and none set in the process (the SDK
    not configured: `metis serve` run without `opentelemetry-instrument --`) made spans that
    went nowhere, without a word; it is said as the gateway starts, and not when a provider
    is given."""
    assert isinstance(trace_api.get_tracer_provider(), trace_api.ProxyTracerProvider)
    unset = create_app(gateway_config(Emulator(), {"opentelemetry": True}))
    given = create_app(gateway_config(Emulator(), {"opentelemetry": True}, _provider(None)))
    said = []
    for app in (unset, given):
        caplog.clear()
        with caplog.at_level("WARNING", logger="metis.gateway"):
            async with app.router.lifespan_context(app):
                pass
        said.append([r.getMessage() for r in caplog.records if "tracer provider" in r.getMessage()])
    assert said[1] == [] and len(said[0]) == 1
    assert "opentelemetry-instrument --" in said[0][0]


def test_spans_asked_for_without_the_otel_extra_are_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a ``redis_url`` without the redis extra is: a ``ConfigError`` naming
    ``gateway.opentelemetry`` as the file loads, which `metis serve` says in one line (it
    said ``internal error: ImportError``)."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # not installed
    with pytest.raises(ConfigError) as refused:
        GatewayConfig.from_dict({"gateway": {"opentelemetry": True}}, environ={})
    assert str(refused.value) == (
        "<inline>: gateway.opentelemetry: spans need the OpenTelemetry API: pip install "
        "'metis[otel]'"
    )
