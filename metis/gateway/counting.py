"""Input tokens counted before a call, for Anthropic's ``/v1/messages/count_tokens`` and
OpenAI's ``/v1/responses/input_tokens`` (docs/gateway.md): a request in the routed model's own
API is passed through to its provider's own counting endpoint as the caller wrote it (the
model renamed, a ``previous_response_id`` served from the gateway's store), so the count is
of the client's body; any other is read into the canonical form and counted by the model's
adapter (the provider's count where it has one, else the estimate)."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response

from metis.errors import ProtocolError
from metis.gateway.anthropic_api import check_version
from metis.gateway.body import parse_body, read_raw
from metis.gateway.conversations import recalled
from metis.gateway.endings import until_disconnect
from metis.gateway.keys import KeyState
from metis.gateway.passthrough import PATH_HEADER, PassThrough
from metis.gateway.passthrough_call import Passing
from metis.gateway.prepared import Prepared
from metis.gateway.service import Gateway, dropped_headers
from metis.gateway.store import Owner, owner_of
from metis.pipeline.request import WireRequest

COUNT_TOKENS = "POST /v1/messages/count_tokens"
INPUT_TOKENS = "POST /v1/responses/input_tokens"
"""The counting endpoints, as the metrics name them."""
COUNT_PATHS = {"anthropic": "/count_tokens", "responses": "/input_tokens"}
"""Each API's counting endpoint, beside its model call's."""
T = TypeVar("T")
JSON = "application/json"


async def count_tokens(passer: PassThrough, request: Request) -> Response:
    """Anthropic's token count: the same key, version and body checks as a message, the
    key's models and rate, the request's deadline, and the client's disconnect."""
    gateway = passer.gateway
    key = gateway.authenticate(request.headers)
    check_version(request)
    settings = gateway.settings
    raw = await read_raw(request, settings.max_request_bytes, settings.request_timeout_seconds)
    body = parse_body(raw)
    passing = passer.plan("anthropic", body, raw, owner_of(key))
    if passing is not None:
        return await _passed(passer, passing, key, request, COUNT_TOKENS)
    if isinstance(body, dict):
        body = {**body, "max_tokens": body.get("max_tokens") or 1}
    prepared = await gateway.prepare("anthropic", body, owner_of(key))
    counted = await counted_for(gateway, key, prepared, request)
    if counted is None:  # the client went away: no one reads this
        return Response(status_code=499)
    served(gateway, "anthropic", prepared.inbound.model, prepared.started, COUNT_TOKENS)
    return Response(json.dumps({"input_tokens": counted}), media_type=JSON)


async def input_tokens(passer: PassThrough, request: Request) -> Response:
    """OpenAI's ``responses.input_tokens.count``: the body read as a Responses request is
    (a ``previous_response_id`` counts the conversation it continues, reasoning items sent
    back by id count the thinking they name), with the key, model, deadline and disconnect
    checks of a count of Anthropic's; what the reader left out is named in the header a
    response names it in."""
    gateway = passer.gateway
    key, owner, body, raw = await read_responses_side(gateway, request)
    passing = passer.plan("responses", body, raw, owner)
    if passing is not None:
        return await _passed(passer, passing, key, request, INPUT_TOKENS)
    prepared = await gateway.prepare("responses", body, owner)
    counted = await counted_for(gateway, key, prepared, request)
    if counted is None:  # the client went away: no one reads this
        return Response(status_code=499)
    served(gateway, "responses", prepared.inbound.model, prepared.started, INPUT_TOKENS)
    reply = {"object": "response.input_tokens", "input_tokens": counted}
    return Response(json.dumps(reply), media_type=JSON, headers=dropped_headers(prepared.reported))


async def read_responses_side(
    gateway: Gateway, request: Request
) -> tuple[KeyState | None, Owner, Any, bytes]:
    """A Responses side request (a count, a compaction) read: its key, whose it is, its body
    and that body's bytes, each reasoning item it sends back by id alone given the thinking it
    names (:func:`metis.gateway.conversations.recalled`)."""
    key = gateway.authenticate(request.headers)
    settings = gateway.settings
    raw = await read_raw(request, settings.max_request_bytes, settings.request_timeout_seconds)
    body: Any = parse_body(raw)
    owner = owner_of(key)
    body, recalled_any = await recalled(gateway.stored, body, owner)
    return key, owner, body, json.dumps(body).encode() if recalled_any else raw


async def _passed(
    passer: PassThrough,
    passing: Passing,
    key: KeyState | None,
    request: Request,
    endpoint: str,
) -> Response:
    """A count passed through to the provider's own counting endpoint: its answer as the
    provider gave it."""
    gateway, model = passer.gateway, str(passing.target.name)

    async def work() -> dict[str, Any] | None:
        await serve_previous_response(passer, passing)  # once the key may name the model
        return await until_disconnect(request, _provider_count(passer, passing, request.headers))

    answer = await admitted(gateway, key, model, work)
    if answer is None:  # the client went away: no one reads this
        return Response(status_code=499)
    served(gateway, passing.api, model, passing.started, endpoint)
    headers = {PATH_HEADER: "pass-through", **dropped_headers(passing.reported)}
    return Response(json.dumps(answer), media_type=JSON, headers=headers)


async def serve_previous_response(passer: PassThrough, passing: Passing) -> None:
    """A passed-through Responses side request (a count, a compaction) given the stored
    conversation its ``previous_response_id`` names, where the upstream has not seen it."""
    if passing.api != "responses":
        return
    asked_store = "store" in passing.body
    await passer.converse(passing)
    if not asked_store:  # a side request has no store to say
        passing.body.pop("store", None)


async def _provider_count(
    passer: PassThrough, passing: Passing, headers: Mapping[str, str]
) -> dict[str, Any]:
    answer = await provider_answer(passer, passing, COUNT_PATHS[passing.api], headers)
    counted = answer.get("input_tokens")
    if not isinstance(counted, int) or isinstance(counted, bool):
        said = f"{passing.adapter.name} answered a token count without input_tokens"
        raise ProtocolError(said, provider=passing.adapter.name)
    return answer


async def provider_answer(
    passer: PassThrough, passing: Passing, path: str, headers: Mapping[str, str]
) -> dict[str, Any]:
    """The provider's answer to the passed-through body at ``path`` beside its model calls'
    endpoint, sent the way those go (their URL and headers, its auth flow, its transport),
    within the gateway's deadline."""
    provider = passing.adapter.pipeline.provider
    assert provider is not None
    call, url, sent = await passer.upstream.addressed(passing, headers)
    try:
        with anyio.fail_after(call.deadline - anyio.current_time()):
            fetched = await provider.fetch(WireRequest(url + path, passing.body, sent), call)
    except TimeoutError:
        assert passing.limit is not None  # set with the call
        raise passing.limit.exceeded() from None
    return fetched.body


async def admitted(
    gateway: Gateway, key: KeyState | None, model: str, work: Callable[[], Awaitable[T]]
) -> T:
    """``work`` done for ``key``: admitted as a request (its models, rate and places; not
    its budget, as counting costs nothing), its place given back when done."""
    if key is None:
        return await work()
    key.check_model(model)
    await gateway.keys.admit(key, model, budgeted=False)
    try:
        return await work()
    finally:
        await gateway.keys.release(key, None, None)


async def counted_for(
    gateway: Gateway, key: KeyState | None, prepared: Prepared, request: Request
) -> int | None:
    """The prepared request's input tokens for ``key`` (None when the client went away
    first)."""
    model = prepared.inbound.model
    return await admitted(
        gateway, key, model, lambda: until_disconnect(request, counted_tokens(gateway, prepared))
    )


async def counted_tokens(gateway: Gateway, prepared: Prepared) -> int:
    """The prepared request's input tokens, within the gateway's deadline."""
    try:
        with anyio.fail_after(gateway.settings.request_timeout_seconds):
            counted = await prepared.target.chat_model.count_tokens(prepared.request)
    except TimeoutError:
        raise gateway.time_limit.exceeded() from None
    return counted.input_tokens


def served(gateway: Gateway, api: str, model: str, started: float, endpoint: str) -> None:
    """A side request (a count, a compaction) answered, counted in the metrics under the
    model it was for."""
    gateway.metrics.request(api, model, 200, time.monotonic() - started, endpoint)
