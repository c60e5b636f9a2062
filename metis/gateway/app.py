"""The ASGI application ``metis serve`` runs (Starlette, the model calls taken before its
router by metis.gateway.front; docs/gateway.md says why): the providers' endpoints, the model
list, health and readiness."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from metis.errors import AdapterError, ConfigError
from metis.gateway.access import note_asked
from metis.gateway.ahead import soon
from metis.gateway.anthropic_api import check_version
from metis.gateway.base_url_said import base_url_said
from metis.gateway.body import parse_body, read_raw
from metis.gateway.call_signatures import RedisCallSignatures
from metis.gateway.compact import COMPACT, compact
from metis.gateway.config import GatewayConfig
from metis.gateway.conversations import recalled
from metis.gateway.counting import COUNT_TOKENS, INPUT_TOKENS, count_tokens, input_tokens
from metis.gateway.embeddings_api import answer_embeddings
from metis.gateway.endings import DeadlineStream, answerable, until_disconnect, watched
from metis.gateway.errors import (
    MethodNotAllowedError,
    RouteNotFoundError,
    shared_store_failed,
)
from metis.gateway.front import GatewayApp
from metis.gateway.frozen import frozen_for_serving as frozen_for_serving  # metis serve's
from metis.gateway.frozen import readied
from metis.gateway.joined_stream import JoinedStream
from metis.gateway.json_text import JSONAnswer
from metis.gateway.keys_redis import RedisLedger
from metis.gateway.metrics import scrape_refused, scraped
from metis.gateway.metrics_shared import SharedMetrics
from metis.gateway.models import SERVED
from metis.gateway.models_api import listed_models, models_asked
from metis.gateway.passthrough import PATH_HEADER, PassThrough
from metis.gateway.relayed_stream import RelayedStream
from metis.gateway.reported import log_reported
from metis.gateway.responses_kept import stored_responses
from metis.gateway.routed import Routed
from metis.gateway.service import Gateway, error_reply, request_id
from metis.gateway.store import RedisResponseStore, owner_of
from metis.gateway.tracing import spans_nowhere

log = logging.getLogger("metis.gateway")
JSON = "application/json"
METRICS_DIR_VARIABLE = "METIS_GATEWAY_METRICS_DIR"
"""Where the workers of ``metis serve --workers N`` share their metrics (set by the CLI)."""
Answer = Response | RelayedStream
Endpoint = Callable[[Request], Awaitable[Answer]]
REQUEST_ID_HEADERS = {
    "anthropic": "request-id",
    "chat": "x-request-id",
    "responses": "x-request-id",
    "embeddings": "x-request-id",
}
"""Where each API names the request an answer is to (Anthropic's ``request-id``, OpenAI's
``x-request-id``)."""


def _json(status: int, body: Any, headers: dict[str, str]) -> Response:
    if isinstance(body, bytes):  # a provider's own body, passed through
        return Response(body, status_code=status, headers=headers, media_type=JSON)
    return JSONAnswer(body, status_code=status, headers=headers)


async def _answer(
    gateway: Gateway, api: str, answer: Awaitable[Answer], endpoint: str = ""
) -> Answer:
    """The request answered; a failed one is counted here (under the name it gave when the
    configuration has it, else with no model: its name may be anything), a served one where it
    ends. ``endpoint``: the method and path counted (the API's model call when not given)."""
    started = time.monotonic()
    SERVED.set("")  # the name this request gives, once found (a previous request's: none)
    response = await _guarded(gateway, api, answer, endpoint)
    if response.status_code != 200:
        elapsed = time.monotonic() - started
        gateway.metrics.request(api, SERVED.get(), response.status_code, elapsed, endpoint)
    _identified(response, api)
    return response


def _identified(response: Answer, api: str) -> None:
    """Every answer names its request in the header the caller's API has for it (an error
    names the id its body gives, a translated stream the id its error events give): the SDKs read
    it as ``_request_id``. An answer that names none is given a new id."""
    header = REQUEST_ID_HEADERS[api]
    if header not in response.headers:
        response.headers[header] = request_id()


async def _guarded(
    gateway: Gateway, api: str, answer: Awaitable[Answer], endpoint: str = ""
) -> Answer:
    """``answer``'s response, or its failure as an error reply in ``api``'s shape, counted in
    its class (a failure that is not classified is the gateway's own: logged, and a 500)."""
    try:
        return await answer
    except AdapterError as exc:
        gateway.metrics.error(api, exc, endpoint)
        failed = error_reply(api, exc, request_id())
    except BaseException as exc:
        if not answerable(exc):
            raise
        gateway.metrics.error(api, "other", endpoint)
        log.exception("gateway request failed", extra={"event": "metis.gateway.error"})
        failed = error_reply(api, AdapterError("internal gateway error"), request_id())
    return _json(failed.status, failed.body, failed.headers)


async def _answered(routed: Routed, api: str, request: Request) -> Answer:
    gateway, passer = routed.gateway, routed.passer
    counted = (gateway.metrics, api)  # a stream's failures, counted where it ends
    key = gateway.authenticate(request.headers)
    if api == "anthropic":
        check_version(request)
    settings = gateway.settings
    raw = await read_raw(request, settings.max_request_bytes, settings.request_timeout_seconds)
    body = parse_body(raw)
    note_asked(body)
    owner = owner_of(key)
    if api == "responses":  # reasoning items sent back by id, from the responses kept
        body, recalled_any = await recalled(gateway.stored, body, owner)
        raw = json.dumps(body).encode() if recalled_any else raw
    passing, found = passer.planned(api, body, raw, owner)
    if passing is not None:
        if passing.stream:  # the client may go before the stream's first event: watched
            opened, watch = await watched(request, passer.stream(passing, request.headers, key))
            if opened is None:
                return Response(status_code=499)
            return RelayedStream(opened, *counted, watch)
        work = passer.complete(passing, request.headers, key)
    else:
        prepared = await gateway.prepare(api, body, owner, found)
        if routed.takes(api, prepared):  # a route with a model of the caller's API
            if prepared.inbound.stream:
                opening = routed.stream(api, prepared, body, raw, request.headers, key)
                route_opened = await until_disconnect(request, opening)
                if route_opened is None:
                    return Response(status_code=499)
                return DeadlineStream(route_opened, *counted)
            work = routed.complete(api, prepared, body, raw, request.headers, key)
        else:
            soon(partial(log_reported, prepared))  # nothing can be refused for it
            if prepared.inbound.stream:
                streamed, watch = await watched(request, gateway.stream(api, prepared, key))
                if streamed is None:
                    return Response(status_code=499)
                streamed.headers[PATH_HEADER] = "translated"
                streamed.headers[REQUEST_ID_HEADERS[api]] = prepared.request.request_id
                return JoinedStream(streamed, *counted, watch)
            work = gateway.complete(api, prepared, key)
    result = await until_disconnect(request, work)
    if result is None:  # the client went away: no one reads this
        return Response(status_code=499)
    return _json(result.status, result.body, {PATH_HEADER: "translated", **result.headers})


def _endpoint(routed: Routed, api: str) -> Callable[[Request], Awaitable[Answer]]:
    """The endpoint of one of the chat APIs."""

    async def endpoint(request: Request) -> Answer:
        return await _answer(routed.gateway, api, _answered(routed, api, request))

    return endpoint


def _side_requests(passer: PassThrough) -> list[tuple[str, Endpoint, str]]:
    """What is asked beside a model call: both APIs' token counts (Anthropic's
    ``count_tokens``, OpenAI's ``input_tokens``) and OpenAI's compaction."""
    gateway = passer.gateway

    async def counting(request: Request) -> Answer:
        work = count_tokens(passer, request)
        return await _answer(gateway, "anthropic", work, COUNT_TOKENS)

    async def counting_input(request: Request) -> Answer:
        return await _answer(gateway, "responses", input_tokens(passer, request), INPUT_TOKENS)

    async def compacting(request: Request) -> Answer:
        return await _answer(gateway, "responses", compact(passer, request), COMPACT)

    return [
        ("/v1/messages/count_tokens", counting, "POST"),
        ("/v1/responses/input_tokens", counting_input, "POST"),
        ("/v1/responses/compact", compacting, "POST"),
    ]


async def _no_route(request: Request, exc: Exception) -> Response:
    """A path the gateway does not serve (404), or one asked with another method (405), in
    the shape of the API the path (or the ``anthropic-version`` header) names."""
    anthropic = request.url.path.startswith("/v1/messages") or bool(
        request.headers.get("anthropic-version")
    )
    where = f"{request.method} {request.url.path}"[:200]
    status = getattr(exc, "status_code", 404)
    error: AdapterError = (
        MethodNotAllowedError(f"Method Not Allowed ({where})")
        if status == 405
        else RouteNotFoundError(f"Invalid URL ({where}){base_url_said(request.url.path[:200])}")
    )
    failed = error_reply("anthropic" if anthropic else "chat", error, request_id())
    headers = {**failed.headers, **(getattr(exc, "headers", None) or {})}
    return _json(failed.status, failed.body, headers)


@asynccontextmanager
async def redis_client(url: str) -> AsyncIterator[Any]:
    """A client of the Redis at ``url`` that the gateways share, for the application's life."""
    from metis.redis.target import connect, parse_redis_url

    async with connect(parse_redis_url(url), max_connections=64, seconds=5.0) as client:
        try:
            await client.ping()
        except Exception as exc:  # served all the same: keyed requests wait for it (529/503)
            shared_store_failed("reach it as the gateway started; keyed requests get 529/503", exc)
        yield client


def _lifespan(
    gateway: Gateway, shared: SharedMetrics | None, state: dict[str, bool]
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The application's life: the shared state's Redis client when ``redis_url`` names one,
    the metrics written for the other workers, the adapters closed at the end."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(gateway.aclose)
            url = gateway.settings.redis_url
            if url is not None:
                client = await stack.enter_async_context(redis_client(url))
                gateway.keys.ledger = RedisLedger(client)
                gateway.stored = RedisResponseStore(client, gateway.settings.stored_seconds)
                gateway.signatures = RedisCallSignatures(client, gateway.settings.stored_seconds)
                gateway.models.share(client)
            group = await stack.enter_async_context(anyio.create_task_group())
            if shared is not None:
                group.start_soon(shared.keep_writing)
            for line in gateway.models.unconfigured():
                log.warning("gateway %s", line, extra={"event": "metis.gateway.unconfigured"})
            if (nowhere := spans_nowhere(gateway.tracer)) is not None:
                log.warning("%s", nowhere, extra={"event": "metis.gateway.spans_nowhere"})
            if getattr(app.state, "serving", False):
                stack.callback(await readied(gateway, app))
            state["ready"] = True
            try:
                yield
            finally:
                state["ready"] = False
                group.cancel_scope.cancel()

    return lifespan


def _routes(served: Sequence[tuple[str, Endpoint, str]]) -> list[Route]:
    """The APIs' routes; a trailing slash is served as the path itself, not redirected (which
    would make the client send a POST's body again)."""
    return [
        Route(path + slash, endpoint, methods=[method])
        for path, endpoint, method in served
        for slash in ("", "/")
    ]


def _first(served: Sequence[tuple[str, Endpoint, str]]) -> dict[str, Endpoint]:
    """The POST endpoints at a fixed path, by path (with its trailing slash too), served
    before Starlette's router (metis.gateway.front)."""
    return {
        path + slash: endpoint
        for path, endpoint, method in served
        if method == "POST" and "{" not in path
        for slash in ("", "/")
    }


NOT_SERVED = {404: _no_route, 405: _no_route}
"""A path the gateway does not serve, and one asked with another method: in the API's shape."""


def create_app(config: GatewayConfig, metrics_dir: str | None = None) -> Starlette:
    """The gateway's ASGI application over ``config``; its lifespan closes the adapters.
    ``metrics_dir``: a directory the workers of one server share their metrics in."""
    gateway = Gateway(config)
    passer = PassThrough(gateway)
    routed = Routed(passer)
    state = {"ready": False}
    shared = SharedMetrics(gateway.metrics, metrics_dir) if metrics_dir else None

    messages, chat, responses = (
        _endpoint(routed, api) for api in ("anthropic", "chat", "responses")
    )

    async def embeddings(request: Request) -> Answer:
        return await _answer(gateway, "embeddings", answer_embeddings(gateway, request))

    async def models(request: Request) -> Answer:
        api, endpoint = models_asked(request)
        return await _answer(gateway, api, listed_models(gateway, request, api, endpoint), endpoint)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        media = "text/plain; version=0.0.4; charset=utf-8"
        if refused := scrape_refused(gateway.metrics_key, request.headers):
            return Response(refused, 401, {"www-authenticate": "Bearer"}, media)
        text = await scraped(gateway.metrics, shared, gateway.keys, gateway.settings.redis_url)
        return Response(text, media_type=media)

    async def ready(request: Request) -> Response:
        return JSONResponse({"ready": state["ready"]}, status_code=200 if state["ready"] else 503)

    served = [
        ("/v1/messages", messages, "POST"),
        *_side_requests(passer),  # before the stored responses' /v1/responses/{response_id}
        ("/v1/chat/completions", chat, "POST"),
        ("/v1/responses", responses, "POST"),
        *stored_responses(gateway),
        ("/v1/embeddings", embeddings, "POST"),
        ("/v1/models", models, "GET"),
    ]
    routes = [
        *_routes(served),
        Route("/v1/models/{model_id:path}", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    app = GatewayApp(
        first=_first(served),
        config=config,
        routes=routes,
        lifespan=_lifespan(gateway, shared, state),
        exception_handlers=NOT_SERVED,
    )
    app.state.gateway = gateway
    app.state.pass_through = passer
    return app


def from_environment() -> Starlette:
    """The application over the configuration ``METIS_GATEWAY_CONFIG`` names: what each
    worker of ``metis serve --workers N`` runs."""
    path = os.environ.get("METIS_GATEWAY_CONFIG")
    if not path:
        raise ConfigError("METIS_GATEWAY_CONFIG is not set: it names the gateway's models.yaml")
    app = create_app(GatewayConfig.load(path), os.environ.get(METRICS_DIR_VARIABLE))
    return frozen_for_serving(app)
