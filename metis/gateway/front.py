"""The gateway's ASGI application (docs/gateway.md, "The server"): Starlette, with the model
calls taken before it. A POST to a providers' model endpoint goes straight to its endpoint,
and the answer is sent with the server's own ``send``: Starlette's router, its two
middlewares and their send wrappers (three calls around every chunk a stream writes) do
nothing such a request needs, since its endpoint answers every failure itself in the
caller's API (metis.gateway.app). Everything else (other methods and paths, the lifespan)
is Starlette's, as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from metis.gateway.collector import Collector

if TYPE_CHECKING:
    from metis.gateway.config import GatewayConfig

FirstEndpoint = Callable[[Request], Awaitable[Any]]
EXPOSED = (
    "request-id",
    "x-request-id",
    "retry-after",
    "x-should-retry",
    "x-metis-dropped",
    "x-metis-model",
    "x-metis-path",
)
"""The answers' headers a page may read beside the plain ones (the SDKs read the first four)."""


class GatewayApp(Starlette):
    """Starlette's application, with ``first``: the POST endpoints by path served before its
    router; from ``config``, its tracer (whose server spans wrap every request) and whether a
    line is logged for each request as it ends (``access_log``: metis.gateway.access). Its
    ``collector`` is told when each of those calls arrives and when it has its answer."""

    def __init__(
        self, *, first: dict[str, FirstEndpoint], config: GatewayConfig, **settings: Any
    ) -> None:
        super().__init__(**settings)
        self.router.redirect_slashes = False  # a trailing slash is served as the path itself
        self.first = first
        self.collector = Collector()
        front: Any = self._front
        if config.tracer is not None:
            from metis.gateway.tracing import ServerSpans

            front = ServerSpans(front, tracer=config.tracer)
        cors = config.settings.cors_origins
        if cors:  # the pages of these origins may call, and read the answers and their ids
            front = CORSMiddleware(
                front, cors, ["GET", "POST", "DELETE"], ["*"], expose_headers=EXPOSED
            )
        if config.settings.access_log:
            from metis.gateway.access import AccessLog

            front = AccessLog(front)
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
