"""The gateway's ASGI application (docs/gateway.md, "The server"): Starlette, with the model
calls taken before it. A POST to a providers' model endpoint goes straight to its endpoint,
and the answer is sent with the server's own ``send``: Starlette's router, its two
middlewares and their send wrappers (three calls around every chunk a stream writes) do
nothing such a request needs, since its endpoint answers every failure itself in the
caller's API (metis.gateway.app). Everything else (other methods and paths, the lifespan)
is Starlette's, as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

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
    router; ``tracer``: the OpenTelemetry tracer whose server spans wrap every request."""

    def __init__(
        self,
        *,
        first: dict[str, FirstEndpoint],
        tracer: Any = None,
        cors: Sequence[str] = (),
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.router.redirect_slashes = False  # a trailing slash is served as the path itself
        self.first = first
        front: Any = self._front
        if tracer is not None:
            from metis.gateway.tracing import ServerSpans

            front = ServerSpans(front, tracer=tracer)
        if cors:  # the pages of these origins may call, and read the answers and their ids
            front = CORSMiddleware(
                front, cors, ["GET", "POST", "DELETE"], ["*"], expose_headers=EXPOSED
            )
        self._served = front

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._served(scope, receive, send)

    async def _front(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self.first.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                answer = await endpoint(Request(scope, receive, send))
                await answer(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
