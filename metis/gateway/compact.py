"""OpenAI's ``POST /v1/responses/compact`` (``client.responses.compact``; docs/gateway.md
"Compaction"): a conversation compacted by the provider into its user messages and one
``compaction`` item, whose content only that provider reads.

Only OpenAI's Responses API compacts on request, so a model of an ``openai_responses`` stack
has the request passed through to its own compact endpoint as the client wrote it (the model
renamed, a ``previous_response_id`` served from the gateway's store, thinking given back its
form), with the key's models, rate, places and budget (charged the pass's usage), the
deadline and the client's disconnect; an answer with no usable usage is charged its
input's estimate, as a reply with none is. metis has no compaction of its own to put in its place
for other models (Anthropic compacts within a call, past a trigger: docs/sessions.md), so
any other model is a 400 in OpenAI's shape that says so."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from metis.adapter.adapter import Adapter
from metis.adapter.compaction import can_compact
from metis.errors import CapabilityError, InvalidRequestError
from metis.gateway.counting import (
    provider_answer,
    read_responses_side,
    serve_previous_response,
    served,
)
from metis.gateway.endings import until_disconnect
from metis.gateway.keys import KeyState
from metis.gateway.passthrough import PATH_HEADER, PassThrough
from metis.gateway.passthrough_call import Passing, speaks
from metis.gateway.service import dropped_headers
from metis.gateway.store import Owner
from metis.model.response import TokenUsage
from metis.wire.compaction import responses_compact_usage
from metis.wire.response_reader import body_tokens

log = logging.getLogger("metis")

COMPACT = "POST /v1/responses/compact"
"""The endpoint, as the metrics name it."""
JSON = "application/json"


async def compact(passer: PassThrough, request: Request) -> Response:
    gateway = passer.gateway
    key, owner, body, raw = await read_responses_side(gateway, request)
    passing = _planned(passer, body, raw, key, owner)
    await serve_previous_response(passer, passing)
    model, charged = passing.target.name, passing.target.request_model
    if key is not None:
        await gateway.keys.admit(key, model)
    usage: TokenUsage | None = None
    try:
        work = provider_answer(passer, passing, "/compact", request.headers)
        answer = await until_disconnect(request, work)
        if answer is not None:
            usage = responses_compact_usage(answer, passing.adapter.name) or _estimated(passing)
    finally:
        if key is not None:
            await gateway.keys.release(key, charged, usage)
    if answer is None:  # the client went away: no one reads this
        return Response(status_code=499)
    if usage is not None:
        gateway.metrics.usage(charged, usage)
    served(gateway, "responses", model, passing.started, COMPACT)
    headers = {PATH_HEADER: "pass-through", **dropped_headers(passing.reported)}
    return Response(json.dumps(answer), media_type=JSON, headers=headers)


def _estimated(passing: Passing) -> TokenUsage:
    """The pass's usage when the answer reports none, so the key is charged for it all the
    same: the input estimated from the body sent, as a reply's with no usage is."""
    log.warning(
        "%s reported no usable token usage for a compaction; estimated it",
        passing.adapter.name,
        extra={"event": "metis.usage_estimated", "adapter": passing.adapter.name},
    )
    return TokenUsage(input_tokens=body_tokens(passing.body), estimated=True)


def _planned(
    passer: PassThrough, body: Any, raw: bytes, key: KeyState | None, owner: Owner
) -> Passing:
    """The request's way to its model's compact endpoint, or why there is none."""
    if not isinstance(body, dict):
        raise InvalidRequestError("invalid request: the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise InvalidRequestError("model: a string naming a model of this gateway is required")
    target = passer.gateway.models.resolve(model)
    if key is not None:
        key.check_model(model)
    adapter = target.chat_model
    if not isinstance(adapter, Adapter) or not (
        speaks(adapter, "responses") and can_compact(adapter)
    ):
        raise CapabilityError(
            f"model {model!r} cannot compact a conversation: only OpenAI's Responses API "
            "has a compact endpoint (a model of an openai_responses stack), and metis has "
            "no compaction of its own for other models"[:300]
        )
    passing = passer.plan_for("responses", body, raw, target, adapter, owner)
    if passing is None:
        raise CapabilityError(
            f"model {model!r} cannot compact this conversation: it holds thinking another "
            "model made, which only that model reads"[:300]
        )
    return passing
