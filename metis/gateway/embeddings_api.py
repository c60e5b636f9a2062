"""OpenAI's embeddings served: ``POST /v1/embeddings`` read, embedded by the named model's
embedding stack (metis.gateway.models ``ModelTable.embedder``), and written back as OpenAI
writes it (docs/gateway.md), under the gateway's key, limits, budget, deadline and metrics."""

from __future__ import annotations

import base64
import struct
import time
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from metis.errors import InvalidRequestError
from metis.gateway.body import read_body
from metis.gateway.endings import until_disconnect
from metis.gateway.inbound import body_object, model_name, optional_int
from metis.gateway.service import Gateway
from metis.model.embeddings import EmbeddingResult

API = "embeddings"
READ = frozenset({"model", "input", "dimensions", "encoding_format", "user"})
MAX_INPUTS = 2048
"""The most inputs one request may give, as OpenAI's API takes."""
FORMATS = ("float", "base64")


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    model: str
    texts: list[str]
    dimensions: int | None
    encoding: str


def read_embeddings(raw: Any) -> EmbeddingsRequest:
    """An embeddings request body (parsed JSON); every field it does not take is a 400, as
    OpenAI's API refuses an unrecognized argument."""
    body = body_object(raw)
    model = model_name(body)
    unknown = [key for key in body if key not in READ]
    if unknown:
        raise InvalidRequestError(f"unrecognized request argument: {unknown[0]}"[:200])
    encoding = body.get("encoding_format") or "float"
    if encoding not in FORMATS:
        raise InvalidRequestError(
            f"encoding_format: expected float or base64, got {encoding!r}"[:200]
        )
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidRequestError("user: expected a string")
    texts = _texts(body.get("input"))
    return EmbeddingsRequest(model, texts, optional_int(body, "dimensions"), encoding)


def _texts(raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    if not isinstance(raw, list) or not raw:
        raise InvalidRequestError("input: expected a string or a non-empty list of strings")
    if len(raw) > MAX_INPUTS:
        raise InvalidRequestError(f"input: at most {MAX_INPUTS} inputs a request, got {len(raw)}")
    for i, item in enumerate(raw):
        if isinstance(item, int | list):
            raise InvalidRequestError(
                "input: token arrays are not served here (metis sends each provider text); "
                "send the texts"
            )
        if not isinstance(item, str):
            raise InvalidRequestError(f"input[{i}]: expected a string")
    return raw


def write_embeddings(result: EmbeddingResult, model: str, encoding: str) -> dict[str, Any]:
    """The reply, naming ``model`` as the client did; a vector as ``base64`` is its
    little-endian float32 bytes, as OpenAI sends it."""
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(vector, encoding)}
        for i, vector in enumerate(result.vectors)
    ]
    tokens = result.usage.input_tokens
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


async def answer_embeddings(gateway: Gateway, request: Request) -> Response:
    """The request embedded: the key checked for the model and admitted (rate, places,
    budget), the call bounded by the deadline and cancelled when the client goes away, its
    usage charged to the key and counted at the catalog's prices."""
    started = time.monotonic()
    key = gateway.authenticate(request.headers)
    settings = gateway.settings
    body = await read_body(request, settings.max_request_bytes, settings.request_timeout_seconds)
    asked = read_embeddings(body)
    if key is not None and not key.may_use(asked.model):
        gateway.models.known(asked.model)  # a name not served is a 404, as on the other APIs
        key.check_model(asked.model)
    embedder, model = gateway.models.embedder(asked.model)
    if key is not None:
        await gateway.keys.admit(key, asked.model)
    result: EmbeddingResult | None = None
    try:
        with anyio.fail_after(settings.request_timeout_seconds):
            work = embedder.embed(asked.texts, model=model, dimensions=asked.dimensions)
            result = await until_disconnect(request, work)
    except TimeoutError:
        raise gateway.time_limit.exceeded() from None
    finally:
        if key is not None:
            spent = (result.model, result.usage) if result is not None else (None, None)
            await gateway.keys.release(key, *spent)
    if result is None:  # the client went away: no one reads this
        return Response(status_code=499)
    gateway.metrics.usage(result.model, result.usage)
    gateway.metrics.request(API, asked.model, 200, time.monotonic() - started)
    return JSONResponse(write_embeddings(result, asked.model, asked.encoding))
