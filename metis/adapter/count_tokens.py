"""Exact input-token counts from the provider's own counting endpoint, where it has one.

``await adapter.count_tokens(request)`` (or ``count_tokens(adapter, request)``) runs the
request through the adapter's stages up to ``encode``, so what is counted is what would be
sent, then asks the provider's counting endpoint:

* Anthropic Messages: ``POST /v1/messages/count_tokens``
  (https://docs.anthropic.com/en/api/messages-count-tokens),
* OpenAI Responses: ``POST /v1/responses/input_tokens``
  (https://platform.openai.com/docs/api-reference/responses/input-tokens),
* Gemini: ``POST /v1beta/models/{model}:countTokens``
  (https://ai.google.dev/api/tokens), on Vertex AI too,
* AWS Bedrock: ``POST /model/{modelId}/count-tokens``, for Converse and for InvokeModel
  (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html).

The counting request is addressed and authenticated by the stack's own stages that do that
for every request (region and project in the URL, SigV4, an OAuth or Entra ID token). Other
providers have no such endpoint (OpenAI Chat Completions, Ollama, the OpenAI-compatible
servers) and get the offline estimate. The result says which it is. When the endpoint fails,
the estimate is returned with the reason, unless ``estimate_on_error=False``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio

from metis.catalog.estimate import estimate_request_tokens
from metis.errors import AdapterError, NetworkError, ProtocolError
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call, DropRecord
from metis.pipeline.pipeline import Pipeline
from metis.pipeline.request import WireRequest, body_bytes
from metis.pipeline.stage import Inner, Stage
from metis.transport.clients import http_errors

if TYPE_CHECKING:
    from metis.adapter.adapter import Adapter


@dataclass(frozen=True, slots=True)
class TokenCount:
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
        return _bedrock(wire)  # Claude through Bedrock's InvokeModel
    body = {k: v for k, v in wire.body.items() if k in _ANTHROPIC_KEYS}
    return wire.url + "/count_tokens", body


def _responses(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    if not wire.url.endswith("/responses"):
        return None
    body = {k: v for k, v in wire.body.items() if k in _RESPONSES_KEYS}
    return wire.url + "/input_tokens", body


def _gemini(wire: WireRequest) -> tuple[str, dict[str, Any]] | None:
    path = wire.url.partition("?")[0]
    for method in (":generateContent", ":streamGenerateContent"):
        if path.endswith(method):
            model = path[: -len(method)].rpartition("/models/")[2]
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
"""By the codec of a stack's ``encode`` stage: where to count and with what body."""


_WATCHERS = frozenset({"invariants", "telemetry"})
"""Stages that watch a reply's events; counting has none."""
_ADDRESSING = frozenset({"url_params", "aws_endpoint", "aws_sigv4", "google_auth", "azure_auth"})
"""Stages after ``encode`` that address and authenticate every request: the count's too."""


def _read_count(payload: Any) -> int | None:
    if isinstance(payload, dict):
        for key in ("input_tokens", "totalTokens", "inputTokens"):
            value = payload.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


async def count_tokens(
    adapter: Adapter, request: CanonicalRequest, *, estimate_on_error: bool = True
) -> TokenCount:
    """How many input tokens ``request`` is, asked of the provider where it can say."""
    wire_model = adapter.wire_model(request.model)
    profile = adapter.stack.token_estimate.for_model(wire_model)
    encode = next((s for s in adapter.pipeline if s.name == "encode"), None)
    codec = getattr(getattr(encode, "options", None), "codec", None)
    endpoint = ENDPOINTS.get(codec) if isinstance(codec, str) else None
    if encode is None or endpoint is None:
        return TokenCount(
            estimate_request_tokens(request, profile),
            "estimate",
            f"{adapter.name} has no token-counting endpoint",
        )
    wire = await _encoded(adapter, request.model_copy(update={"stream": False}), encode)
    target = endpoint(wire)
    if target is None:
        return TokenCount(
            estimate_request_tokens(request, profile),
            "estimate",
            f"{adapter.name}: no counting endpoint beside {wire.url}",
        )
    url, body = target
    try:
        counting = await _addressed(adapter, request, encode, WireRequest(url, body, wire.headers))
        tokens = await _ask(adapter, counting.url, counting.body, counting.headers, encode)
    except AdapterError as error:
        if not estimate_on_error:
            raise
        return TokenCount(
            estimate_request_tokens(request, profile),
            "estimate",
            f"{url} failed: {error}",
        )
    return TokenCount(tokens, "provider", url)


async def _encoded(adapter: Adapter, request: CanonicalRequest, encode: Any) -> WireRequest:
    """The wire request the adapter would send, from its stages up to ``encode``."""
    stages = list(adapter.pipeline.stages)
    outer = [s for s in stages[: stages.index(encode) + 1] if s.name not in _WATCHERS]
    captured: list[WireRequest] = []
    pipeline = Pipeline([*outer, _Capture(captured)], "count")
    async with pipeline.run(request, _call(adapter, request)) as events:
        async for _ in events:
            pass
    if not captured:
        raise ProtocolError(f"{adapter.name}: the stack encoded no request", provider=adapter.name)
    return captured[0]


def _call(adapter: Adapter, request: CanonicalRequest) -> Call:
    return Call(
        request_id=request.request_id,
        provider=adapter.name,
        model=request.model,
        wire_model=adapter.wire_model(request.model),
        session_id=request.session_id,
        drops=DropRecord(secrets=adapter.endpoint.secrets),
    )


async def _addressed(
    adapter: Adapter, request: CanonicalRequest, encode: Any, counting: WireRequest
) -> WireRequest:
    """``counting`` through the stack's addressing and authenticating stages."""
    stages = list(adapter.pipeline.stages)
    after = [s for s in stages[stages.index(encode) + 1 :] if s.name in _ADDRESSING]
    if not after:
        return counting
    captured: list[WireRequest] = []
    pipeline = Pipeline([*after, _Capture(captured)], "count", takes=WireRequest)
    async with pipeline.run(counting, _call(adapter, request)) as events:
        async for _ in events:
            pass
    return captured[0] if captured else counting


async def _ask(
    adapter: Adapter, url: str, body: dict[str, Any], headers: dict[str, str], encode: Any
) -> int:
    http = adapter.http_client()
    try:
        with anyio.fail_after(adapter.config.timeout_seconds):
            # The bytes the stack's signing stage (SigV4) signed: the transport's serializer.
            response = await http.post(url, content=body_bytes(body), headers=headers)
    except http_errors(TimeoutError) as exc:
        raise NetworkError(
            f"counting tokens at {url} failed: {type(exc).__name__}: {exc}", provider=adapter.name
        ) from exc
    if response.status_code >= 400:
        raise encode.codec.error_from_http(
            response.status_code, dict(response.headers), response.content
        )
    try:
        count = _read_count(response.json())
    except ValueError:
        count = None
    if count is None:
        raise ProtocolError(
            f"{url} answered without a token count: {response.text[:200]!r}",
            provider=adapter.name,
        )
    return count


class _Capture(Stage[WireRequest, WireRequest, Any, Any]):
    """Keeps the encoded request instead of sending it."""

    name = "capture"
    terminal = True

    def __init__(self, captured: list[WireRequest]) -> None:
        super().__init__()
        self.captured = captured

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> AsyncIterator[Any]:
        self.captured.append(request)
        nothing: tuple[Any, ...] = ()
        for item in nothing:
            yield item
