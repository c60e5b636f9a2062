"""Exact input-token counts from the provider's own counting endpoint, where it has one.

``await adapter.count_tokens(request)`` (or ``count_tokens(adapter, request)``) runs the
request through the adapter's stages up to ``encode``, so what is counted is what would be
sent, then asks the provider's counting endpoint:

* Anthropic Messages: ``POST /v1/messages/count_tokens``
  (https://docs.anthropic.com/en/api/messages-count-tokens); Claude on Vertex AI:
  ``POST .../publishers/anthropic/models/count-tokens:rawPredict``, the model in the body
  (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens),
* OpenAI Responses: ``POST /v1/responses/input_tokens``
  (https://platform.openai.com/docs/api-reference/responses/input-tokens),
* Gemini: ``POST /v1beta/models/{model}:countTokens``
  (https://ai.google.dev/api/tokens), on Vertex AI too,
* AWS Bedrock: ``POST /model/{modelId}/count-tokens``, for Converse and for InvokeModel
  (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html).

The counting request goes the way every request to the provider goes (the provider's
``fetch``, docs/engine.md): addressed and authenticated by the stack's auth flow (region and
project in the URL, SigV4, an OAuth or Entra ID token), sent through the transport with its
deadlines and redirect policy (never to another origin with the key), its answer read under
the JSON limits, an error classified by the codec with every secret hidden. Other
providers have no such endpoint (OpenAI Chat Completions, Ollama, the OpenAI-compatible
servers) and get the offline estimate. The result says which it is. When the endpoint fails,
the estimate is returned with the reason, unless ``estimate_on_error=False``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import unquote

import anyio

from metis.adapter.checks import a_request
from metis.catalog.estimate import TokenProfile, estimate_request_tokens, uncounted_files
from metis.core.ids import new_request_id
from metis.core.secrets import scrub_url
from metis.errors import AdapterError, ProtocolError, scrub_error
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call, DropRecord
from metis.pipeline.config import AdapterConfig
from metis.pipeline.endpoint import Endpoint
from metis.pipeline.pipeline import Pipeline
from metis.pipeline.request import WireRequest
from metis.stacks.loader import StackSpec


class Countable(Protocol):
    """What counting needs of an adapter (an :class:`~metis.adapter.Adapter` is one): its
    name, stack, pipeline (whose provider sends), configuration, endpoint and model names."""

    name: str
    stack: StackSpec
    config: AdapterConfig
    endpoint: Endpoint

    @property
    def pipeline(self) -> Pipeline: ...

    def wire_model(self, model: str) -> str: ...


@dataclass(frozen=True, slots=True)
class TokenCount:
    """How many input tokens a request is: ``source`` says whether the provider's own
    endpoint counted them or metis estimated them offline, ``detail`` which or why."""

    input_tokens: int
    source: Literal["provider", "estimate"]
    detail: str
    """provider: the endpoint asked; estimate: why no endpoint was asked or what failed."""


_ANTHROPIC_KEYS = ("model", "messages", "system", "tools", "tool_choice", "thinking")
_RESPONSES_KEYS = (
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "truncation",
)


def _anthropic(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    if not wire.url.endswith("/messages"):
        return _vertex_anthropic(wire) or _bedrock(wire)  # Claude on Vertex AI, Bedrock
    body = {k: v for k, v in wire.body.items() if k in _ANTHROPIC_KEYS}
    return wire.url + "/count_tokens", body


def _vertex_anthropic(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    path = wire.url.partition("?")[0]
    models, slash, method = path.rpartition("/publishers/anthropic/models/")
    if not slash or not method.endswith((":rawPredict", ":streamRawPredict")):
        return None
    body = {k: v for k, v in wire.body.items() if k in _ANTHROPIC_KEYS}
    body["anthropic_version"] = _VERTEX_VERSION
    return models + slash + "count-tokens:rawPredict", body


_VERTEX_VERSION = "vertex-2023-10-16"
"""The body's version on Vertex AI, which counts with the model in the body (encode's)."""


def _responses(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    if not wire.url.endswith("/responses"):
        return None
    body = {k: v for k, v in wire.body.items() if k in _RESPONSES_KEYS}
    return wire.url + "/input_tokens", body


def _gemini(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    path = wire.url.partition("?")[0]
    for method in (":generateContent", ":streamGenerateContent"):
        if path.endswith(method):
            model = unquote(path[: -len(method)].rpartition("/models/")[2])  # as the URL has it
            inner = {"model": f"models/{model}", **wire.body}
            return path[: -len(method)] + ":countTokens", {"generateContentRequest": inner}
    return None


def _bedrock(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    path = wire.url.partition("?")[0]
    for suffix, kind in _BEDROCK_SUFFIXES:
        if path.endswith(suffix):
            if kind == "converse":
                given = {k: v for k, v in wire.body.items() if k in _CONVERSE_KEYS}
            else:
                given = {"body": json.dumps(wire.body, separators=(",", ":"))}
            return path[: -len(suffix)] + "/count-tokens", {"input": {kind: given}}
    return None


_BEDROCK_SUFFIXES = (
    ("/converse-stream", "converse"),
    ("/converse", "converse"),
    ("/invoke-with-response-stream", "invokeModel"),
    ("/invoke", "invokeModel"),
)
_CONVERSE_KEYS = ("messages", "system", "toolConfig", "additionalModelRequestFields")

CountEndpoint = Callable[[WireRequest], "tuple[str, dict[str, Any]] | None"]
ENDPOINTS: dict[str, CountEndpoint] = {
    "anthropic": _anthropic,
    "openai_responses": _responses,
    "schema": _gemini,  # the schema-driven codec serves Gemini; _gemini checks the URL
    "bedrock_converse": _bedrock,
    "bedrock_anthropic": _bedrock,
}
"""By the provider's codec: where to count and with what body."""


def _read_count(payload: Any) -> int | None:
    if isinstance(payload, dict):
        for key in ("input_tokens", "totalTokens", "inputTokens"):
            value = payload.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


async def count_tokens(
    adapter: Countable, request: CanonicalRequest, *, estimate_on_error: bool = True
) -> TokenCount:
    """How many input tokens ``request`` is, asked of the provider where it can say."""
    a_request(request, adapter.name)
    wire_model = adapter.wire_model(request.model)
    profile = adapter.stack.token_estimate.for_model(wire_model)
    provider = adapter.pipeline.provider
    encode = provider.part("encode") if provider is not None else None
    endpoint = ENDPOINTS.get(provider.codec_name or "") if provider is not None else None
    if provider is None or encode is None or endpoint is None:
        return _estimated(request, profile, f"{adapter.name} has no token-counting endpoint")
    call = side_call(adapter, request)
    unstreamed = request.model_copy(update={"stream": False})
    wire = await adapter.pipeline.prepare(unstreamed, call, through=encode)
    target = endpoint(wire)
    if target is None:
        return _estimated(
            request, profile, f"{adapter.name}: no counting endpoint beside {scrub_url(wire.url)}"
        )
    url, body = target
    try:
        answer = await provider.fetch(WireRequest(url, body, wire.headers), call)
        tokens = _read_count(answer.body)
        if tokens is None:
            raise ProtocolError(
                f"{scrub_url(url)} answered without a token count: {str(answer.body)[:200]!r}",
                provider=adapter.name,
            )
    except AdapterError as error:
        scrub_error(error, adapter.endpoint.secrets)
        if not estimate_on_error:
            raise
        return _estimated(request, profile, f"{scrub_url(url)} failed: {error}")
    return TokenCount(tokens, "provider", scrub_url(url))


def _estimated(request: CanonicalRequest, profile: TokenProfile, why: str) -> TokenCount:
    """The offline estimate, saying why, and how many files it could not count."""
    files = uncounted_files(request)
    left_out = (
        f"; {files} file{'s' if files != 1 else ''} (a PDF, audio, video) not counted: only the "
        "provider can count them"
        if files
        else ""
    )
    return TokenCount(estimate_request_tokens(request, profile), "estimate", why + left_out)


def side_call(adapter: Countable, request: CanonicalRequest) -> Call:
    """A side request's identity (counting, compacting): the call's, with the adapter's
    deadline."""
    return Call(
        request_id=request.request_id,
        provider=adapter.name,
        model=request.model,
        wire_model=adapter.wire_model(request.model),
        session_id=request.session_id,
        deadline=anyio.current_time() + adapter.config.timeout_seconds,
        drops=DropRecord(secrets=adapter.endpoint.secrets),
    )


def model_call(adapter: Countable, model: str) -> Call:
    """A side request's identity (a batch, a cached content) for ``model``: a call of its own,
    with the adapter's deadline; ``model`` as ``provider:model`` is named to the provider as
    the adapter names it, anything else (``anthropic:batch``'s ``batch``) as it is."""
    return Call(
        request_id=new_request_id(),
        provider=adapter.name,
        model=model,
        wire_model=adapter.wire_model(model) if ":" in model else model,
        deadline=anyio.current_time() + adapter.config.timeout_seconds,
        drops=DropRecord(secrets=adapter.endpoint.secrets),
    )
