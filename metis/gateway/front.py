"""The gateway's ASGI application (docs/gateway.md, "The server"): Starlette, with the model
calls taken before it. A POST to a providers' model endpoint goes straight to its endpoint,
and the answer is sent with the server's own ``send``: Starlette's router, its two
middlewares and their send wrappers (three calls around every chunk a stream writes) do
nothing such a request needs, since its endpoint answers every failure itself in the
caller's API (metis.gateway.app). Everything else (other methods and paths, the lifespan)
is Starlette's, as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request

from metis.gateway.collector import Collector

FirstEndpoint = Callable[[Request], Awaitable[Any]]


class GatewayApp(Starlette):
    """Starlette's application, with ``first``: the POST endpoints by path served before its
    router; ``tracer``: the OpenTelemetry tracer whose server spans wrap every request. Its
    ``collector`` is told when each of those calls arrives and when it has its answer."""

    def __init__(
        self, *, first: dict[str, FirstEndpoint], tracer: Any = None, **settings: Any
    ) -> None:
        super().__init__(**settings)
        self.first = first
        self.collector = Collector()
        front: Any = self._front
        if tracer is not None:
            from metis.gateway.tracing import ServerSpans

            front = ServerSpans(front, tracer=tracer)
        self._served = front

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._served(scope, receive, send)

    async def _front(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self.first.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                collector = self.collector
                collector.arrived()
                try:
                    answer = await endpoint(Request(scope, receive, send))
                finally:
                    collector.answered()
                await answer(scope, receive, send)
                return
        self.collector.aside()
        await super().__call__(scope, receive, send)
