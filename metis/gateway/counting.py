"""Input tokens counted before a call: the provider's count where it has one, else the
estimate (metis.adapter.count_tokens), for Anthropic's ``/v1/messages/count_tokens`` and
OpenAI's ``/v1/responses/input_tokens`` (docs/gateway.md)."""

from __future__ import annotations

import time
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from metis.gateway.body import read_body
from metis.gateway.conversations import recalled
from metis.gateway.endings import until_disconnect
from metis.gateway.errors import GatewayPermissionError, GatewayTimeoutError
from metis.gateway.keys import KeyState
from metis.gateway.service import Gateway, Prepared, dropped_headers
from metis.gateway.store import owner_of

COUNT_TOKENS = "POST /v1/messages/count_tokens"
INPUT_TOKENS = "POST /v1/responses/input_tokens"
"""The counting endpoints, as the metrics name them."""


async def counted_for(
    gateway: Gateway, key: KeyState | None, prepared: Prepared, request: Request
) -> int | None:
    """The prepared request's input tokens for ``key``: admitted as a request (its rate and
    places; not its budget, as counting costs nothing), its place given back when done; None
    when the client went away first."""
    check_model(key, prepared)
    if key is None:
        return await until_disconnect(request, counted_tokens(gateway, prepared))
    await gateway.keys.admit(key, prepared.inbound.model, budgeted=False)
    try:
        return await until_disconnect(request, counted_tokens(gateway, prepared))
    finally:
        await gateway.keys.release(key, None, None)


async def counted_tokens(gateway: Gateway, prepared: Prepared) -> int:
    """The prepared request's input tokens, within the gateway's deadline."""
    try:
        with anyio.fail_after(gateway.settings.request_timeout_seconds):
            counted = await prepared.target.chat_model.count_tokens(prepared.request)
    except TimeoutError:
        raise GatewayTimeoutError("the request took longer than the gateway allows") from None
    return counted.input_tokens


def served(gateway: Gateway, api: str, prepared: Prepared, endpoint: str) -> None:
    """A count answered, counted in the metrics under the model it counted for."""
    elapsed = time.monotonic() - prepared.started
    gateway.metrics.request(api, prepared.inbound.model, 200, elapsed, endpoint)


def check_model(key: KeyState | None, prepared: Prepared) -> None:
    if key is not None and not key.may_use(prepared.inbound.model):
        name, model = key.spec.name, prepared.inbound.model
        raise GatewayPermissionError(f"key {name!r} may not use model {model!r}")


async def input_tokens(gateway: Gateway, request: Request) -> Response:
    """OpenAI's ``responses.input_tokens.count``: the body read as a Responses request is
    (a ``previous_response_id`` counts the conversation it continues, reasoning items sent
    back by id count the thinking they name), with the key, model, deadline and disconnect
    checks of a count of Anthropic's; what the reader left out is named in the header a
    response names it in."""
    key = gateway.authenticate(request.headers)
    settings = gateway.settings
    body: Any = await read_body(
        request, settings.max_request_bytes, settings.request_timeout_seconds
    )
    owner = owner_of(key)
    body, _ = await recalled(gateway.stored, body, owner)
    prepared = await gateway.prepare("responses", body, owner)
    counted = await counted_for(gateway, key, prepared, request)
    if counted is None:  # the client went away: no one reads this
        return Response(status_code=499)
    served(gateway, "responses", prepared, INPUT_TOKENS)
    reply = {"object": "response.input_tokens", "input_tokens": counted}
    return JSONResponse(reply, headers=dropped_headers(prepared.reported))
