"""The model list (``GET /v1/models``, ``GET /v1/models/{id}``): one list both SDKs read,
OpenAI's fields and Anthropic's on each entry, only the models the caller's key may use."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from metis.gateway.errors import ModelNotFoundError
from metis.gateway.models import listed_page
from metis.gateway.service import Gateway


def models_asked(request: Request) -> tuple[str, str]:
    """The API a model-list request is in (Anthropic's when it names an ``anthropic-version``,
    else OpenAI's) and the endpoint it is counted under."""
    api = "anthropic" if request.headers.get("anthropic-version") else "chat"
    named = request.path_params.get("model_id") is not None
    return api, "GET /v1/models/{id}" if named else "GET /v1/models"


async def listed_models(gateway: Gateway, request: Request, api: str, endpoint: str) -> Response:
    """OpenAI's ``object``/``created``/``owned_by`` and Anthropic's ``type``/
    ``display_name``/``created_at`` on each entry; ``/v1/models/{id}`` one of them
    (``models.retrieve`` in both). A failure is raised, for the caller to answer in ``api``'s
    shape; a list served is counted here, under ``endpoint``."""
    started = time.monotonic()
    named = request.path_params.get("model_id")
    key = gateway.authenticate(request.headers)
    async with gateway.keys.holding(key):  # a request of the key's, costing nothing
        listed = gateway.models.listing()
    data = [
        {
            **entry,
            "object": "model",
            "type": "model",
            "display_name": entry["id"],
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
            "owned_by": "metis",
            "lifecycle": "active",  # the anthropic SDK's ModelInfo requires it
            "max_input_tokens": entry.get("context_window"),  # ModelInfo's limits
            "max_tokens": entry.get("max_output_tokens"),
        }
        for entry in listed
        if key is None or key.may_use(entry["id"])
    ]
    if named is not None:
        found = next((entry for entry in data if entry["id"] == named), None)
        if found is None:
            raise ModelNotFoundError(f"model: {named}"[:200])
    else:
        found = listed_page(data, request.query_params if api == "anthropic" else None)
    gateway.metrics.request(api, named or "", 200, time.monotonic() - started, endpoint)
    return JSONResponse(found)
