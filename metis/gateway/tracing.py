"""OpenTelemetry server spans (docs/gateway.md "Traces"): one span of kind SERVER per request
to the providers' APIs, from its first byte to the last of its reply (a stream's end
included), after the HTTP semantic conventions. It continues the trace of the incoming
``traceparent`` (the globally configured propagator, W3C Trace Context by default), and the
library's client spans (``OpenTelemetrySink``) of the calls it makes are its children.
Needs ``pip install 'metis[otel]'``."""

from __future__ import annotations

from typing import Any

TRACED = ("/v1/",)
"""The paths that get a span: the APIs, not health checks and metrics scrapes."""


def tracer_for(tracer_provider: Any = None) -> Any:
    """The gateway's tracer (the global provider's when none is given)."""
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ImportError(
            "gateway.opentelemetry needs the OpenTelemetry API: pip install 'metis[otel]'"
        ) from exc
    from metis.core.version import VERSION

    return trace.get_tracer("metis.gateway", VERSION, tracer_provider=tracer_provider)


def spans_nowhere(tracer: Any) -> str | None:
    """What to say when ``tracer`` (the gateway's, None when spans are off) is the global
    provider's and no provider was set in the process: the OpenTelemetry API alone records
    nothing, so the spans would go nowhere without a word. None otherwise."""
    if tracer is None:
        return None
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    if not isinstance(tracer, trace.ProxyTracer):
        return None  # a provider given to GatewayConfig.load
    return (
        "gateway.opentelemetry is on but no tracer provider is set in this process, so its "
        "spans go nowhere: run it as `opentelemetry-instrument -- metis serve ...` (pip "
        "install opentelemetry-distro opentelemetry-exporter-otlp; the OTEL_* variables say "
        'where to send them), or set one in code (docs/gateway.md, "Traces")'
    )


def _attributes(scope: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "http.request.method": scope.get("method", ""),
        "url.path": scope.get("path", ""),
        "url.scheme": scope.get("scheme", "http"),
        "http.route": scope.get("path", ""),
        "network.protocol.version": scope.get("http_version", "1.1"),
    }
    server, client = scope.get("server"), scope.get("client")
    if server:
        attributes["server.address"], attributes["server.port"] = server[0], server[1]
    if client:
        attributes["client.address"] = client[0]
    if "user-agent" in headers:
        attributes["user_agent.original"] = headers["user-agent"]
    return attributes


class ServerSpans:
    """ASGI middleware: the SERVER span around each traced request."""

    def __init__(self, app: Any, tracer: Any) -> None:
        from opentelemetry import propagate, trace

        self.app, self.tracer = app, tracer
        self._propagate, self._trace = propagate, trace

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(TRACED):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        parent = self._propagate.extract(headers)
        trace = self._trace
        with self.tracer.start_as_current_span(
            f"{scope.get('method', '')} {path}",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes=_attributes(scope, headers),
            record_exception=True,
            set_status_on_exception=True,
        ) as span:

            async def sending(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_attribute("error.type", str(status))
                        span.set_status(trace.Status(trace.StatusCode.ERROR))
                await send(message)

            await self.app(scope, receive, sending)
