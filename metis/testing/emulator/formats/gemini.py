"""Gemini API: ``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent``
(``?alt=sse`` for SSE, otherwise a streamed JSON array) and ``:countTokens``; ``GET
/v1beta/models`` and ``/v1beta/models/{model}``. A request naming a ``cachedContent`` reads it
(:mod:`.gemini_cached`; the endpoints that make one are :mod:`.gemini_caches`).

Auth: ``x-goog-api-key`` or ``?key=`` (403 ``PERMISSION_DENIED`` without one; a refused key is
400 ``INVALID_ARGUMENT`` with reason ``API_KEY_INVALID``, as Gemini answers). The 400 rules are
``tables/gemini.yaml`` and the checks of :mod:`.gemini_rules`. Streams are ``data:`` SSE
separated by ``\\r\\n\\r\\n`` (as recorded), JSON with ``": "`` separators, ``usageMetadata`` on
every chunk, function calls whole (with no id) in one chunk, thought parts (``thought: true``)
first when ``thinkingConfig.includeThoughts``, and a thought signature on the first function
call (Gemini 3) or the first part after thinking.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.formats.gemini_cached import read_cached_content
from metis.testing.emulator.formats.gemini_reply import (
    answer,
    finish_reason,
    reply_parts,
    stream_chunks,
    usage_metadata,
)
from metis.testing.emulator.formats.gemini_rules import RULES, normalized
from metis.testing.emulator.formats.server_gemini import grounding, url_context
from metis.testing.emulator.model import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn
from metis.testing.emulator.rules import Refused, check
from metis.testing.emulator.wire import (
    Frame,
    HttpRequest,
    Ids,
    JsonReply,
    dumps,
    is_int,
    text_of,
)

SEPARATORS = (",", ": ")
_RPC = "type.googleapis.com/google.rpc."
_VARY = "Origin, X-Origin, Referer"
API_KEY_INVALID: list[dict[str, Any]] = [
    {
        "@type": _RPC + "ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    },
    {
        "@type": _RPC + "LocalizedMessage",
        "locale": "en-US",
        "message": "API key not valid. Please pass a valid API key.",
    },
]
INTERNAL = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
FAULTS: dict[str, tuple[Any, ...]] = {
    "overloaded": (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    "server_error": (500, "INTERNAL", INTERNAL),
    "auth": (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
    "out_of_credit": (
        429,
        "RESOURCE_EXHAUSTED",
        "Your prepayment credits are depleted. Please go to AI Studio at "
        "https://ai.studio/projects to manage your project and billing.",
    ),
}
IN_STREAM: dict[str, tuple[Any, ...]] = {
    **FAULTS,
    "rate_limit": (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
}
CHOICES = {"ANY": "required", "NONE": "none", "VALIDATED": "auto"}
_QUOTA = {
    "@type": _RPC + "QuotaFailure",
    "violations": [
        {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
            "quotaValue": "10",
        }
    ],
}
_UNREGISTERED = (
    "Method doesn't allow unregistered callers (callers without established identity). Please "
    "use API Key or other form of API consumer identity to call this API."
)
_OVER_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)


GOOGLE_JSON = {"content-type": "application/json; charset=UTF-8"}
"""The content type of Google's JSON replies (the Gemini API's, Vertex's)."""


def google_json(body: Any, headers: dict[str, str] = GOOGLE_JSON, status: int = 200) -> JsonReply:
    """A JSON reply as Google's APIs write it (indented, ``": "``)."""
    return JsonReply(status, body, dict(headers), indent=2, separators=SEPARATORS)


def google_error(
    status: int, state: str, message: str, details: list[dict[str, Any]] | None = None
) -> JsonReply:
    error: dict[str, Any] = {"code": status, "message": message, "status": state}
    if details:
        error["details"] = details
    return google_json({"error": error}, {**GOOGLE_JSON, "vary": _VARY}, status)


NO_MODEL = (
    "models/{model} is not found for API version v1beta, or is not supported for "
    "generateContent. Call ModelService.ListModels to see the list of available models and "
    "their supported methods."
)


class Gemini(Format):
    name = "gemini"
    routes: ClassVar[Sequence[Route]] = (
        (
            "POST",
            r"/(v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent|countTokens)",
            "generate",
        ),
        ("GET", r"/(v1|v1beta|v1alpha)/models", "models"),
        ("GET", r"/(v1|v1beta|v1alpha)/models/(?P<model>[^/:]+)", "model"),
    )
    rules = RULES
    catalog: ClassVar[tuple[str, ...]] = ("google",)
    too_long = (
        "The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit})."
    )
    no_model = (404, NO_MODEL)
    window = 1_048_576

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        """``/v1/models`` is OpenAI's too: a Gemini client sends its key Google's way."""
        google = request.header("x-goog-api-key") or "key" in request.query
        listing = endpoint.startswith("model") and request.path.startswith("/v1/")
        return not listing or bool(google)

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        key = request.header("x-goog-api-key") or request.query.get("key")
        if not key:
            return google_error(403, "PERMISSION_DENIED", _UNREGISTERED)
        return self.fault("auth", request, 0) if keys is not None and key not in keys else None

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        state = {404: "NOT_FOUND", 403: "PERMISSION_DENIED"}.get(refused.status, "INVALID_ARGUMENT")
        return google_error(refused.status, state, refused.message)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            retry = {"@type": _RPC + "RetryInfo", "retryDelay": f"{retry_after:g}s"}
            return google_error(429, "RESOURCE_EXHAUSTED", _OVER_QUOTA, [_QUOTA, retry])
        if kind == "context_overflow":
            return self.refusal(self.overflow(1048577, 1048576), request)
        status, state, message = FAULTS[kind]
        return google_error(status, state, message, API_KEY_INVALID if kind == "auth" else None)

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        status, state, message = IN_STREAM.get(kind, FAULTS["server_error"])
        error = dumps({"error": {"code": status, "message": message, "status": state}}, SEPARATORS)
        return [
            Frame(b"data: ", error, b"\r\n\r\n")
            if call.options["sse"]
            else Frame(b",\r\n", error, b"\n]")
        ]

    def headers(self, request: HttpRequest) -> dict[str, str]:
        return {"vary": _VARY, "server-timing": "gfet4t7; dur=1"}

    def stream_headers(self, call: Call) -> dict[str, str]:
        if call.options["sse"]:
            return {"content-type": "text/event-stream", "content-disposition": "attachment"}
        return dict(GOOGLE_JSON)

    def parse(self, call: Call) -> None:
        call.model = call.match["model"]
        method = call.match["method"]
        body = call.body
        if method == "countTokens" and isinstance(
            body.get("generateContentRequest") or body.get("generate_content_request"), dict
        ):
            body = body.get("generateContentRequest") or body["generate_content_request"]
        call.body = normalized(body)
        check(self.rules, call.body, call)
        read_cached_content(call)
        call.stream = method == "streamGenerateContent"
        call.options["sse"] = call.request.query.get("alt") == "sse"

    def serve(self, call: Call) -> JsonReply | None:
        if call.endpoint == "generate" and call.match["method"] == "countTokens":
            total = self.read(call).tokens
            body = {
                "totalTokens": total,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
            }
            return google_json(body)
        if call.endpoint == "generate":
            return None
        listed = [
            _listed(m.id, m.name, m.context, m.output)
            for m in self.models(call, self.catalog, (1_048_576, 65_536))
            # Claude on Vertex is not a Gemini API model
            if call.endpoint == "model" or not m.id.startswith("claude")
        ]
        body = listed[0] if call.endpoint == "model" else {"models": listed}
        return google_json(body, {})

    def read(self, call: Call) -> Prompt:
        body = call.body
        config = body.get("generationConfig") or {}
        thinking_config = config.get("thinkingConfig") or {}
        budget = thinking_config.get("thinkingBudget")
        thinking_model = bool(re.search(r"2\.5|gemini-3|thinking", call.model))
        thinks = budget != 0 and (
            thinking_model or is_int(budget) or "thinkingLevel" in thinking_config
        )
        tools = [
            ToolSpec(
                d["name"],
                str(d.get("description") or ""),
                d.get("parametersJsonSchema") or d.get("parameters") or {},
            )
            for tool in body.get("tools") or []
            for d in tool.get("functionDeclarations") or []
        ]
        calling = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
        mode = str(calling.get("mode", "AUTO")).upper()
        allowed = calling.get("allowedFunctionNames")
        choice = (
            f"tool:{allowed[0]}"
            if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1
            else CHOICES.get(mode, "auto")
        )
        instruction = body.get("systemInstruction")
        system = text_of(instruction.get("parts")) if isinstance(instruction, dict) else ""
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        limit = config.get("maxOutputTokens")
        call.options.update(
            include_thoughts=thinking_config.get("includeThoughts") is True,
            signed=thinks and (bool(tools) or call.model.startswith("gemini-3")),
        )
        return Prompt(
            model=call.model,
            turns=[_turn(i, content) for i, content in enumerate(body["contents"])],
            system=system,
            tools=tools,
            tool_choice=choice,
            thinking=thinks,
            max_tokens=limit if isinstance(limit, int) else None,
            output_schema=schema if isinstance(schema, dict) else None,
            json_mode=config.get("responseMimeType") == "application/json",
            stop_sequences=[s for s in config.get("stopSequences") or () if isinstance(s, str)],
            segments=[dumps(body.get("tools") or [], (", ", ": ")).decode() + system]
            + [dumps(c, (", ", ": ")).decode() for c in body["contents"]],
            provider=self.name,
            items=body["contents"],
        )

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> Any:
        parts = reply_parts(call, reply)
        response_id = ids.token(22, "alnum")
        call.options["response_id"] = response_id
        visible = reply.usage.output_tokens - reply.usage.thinking_tokens
        candidate = {
            "content": {"parts": parts, "role": "model"},
            "finishReason": finish_reason(reply),
            "index": 0,
        }
        if (metadata := grounding(reply, ids)) is not None:
            candidate["groundingMetadata"] = metadata
        if (fetched := url_context(reply)) is not None:
            candidate["urlContextMetadata"] = fetched
        body = answer(call.model, response_id, candidate, usage_metadata(reply, visible))
        if call.stream:
            return body
        return google_json(self.shaped(call, body), {**self.headers(call.request), **GOOGLE_JSON})

    def shaped(self, call: Call, body: dict[str, Any]) -> dict[str, Any]:
        """A reply's body (or a streamed chunk) as this API gives it."""
        return body

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        candidate = rendered["candidates"][0]
        chunks = stream_chunks(
            call.model, call.options["response_id"], reply, candidate["content"]["parts"]
        )
        for key in ("groundingMetadata", "urlContextMetadata"):  # on the last chunk
            if key in candidate:
                chunks[-1]["candidates"][0][key] = candidate[key]
        payloads = [dumps(self.shaped(call, chunk), SEPARATORS) for chunk in chunks]
        if call.options["sse"]:
            return [Frame(b"data: ", payload, b"\r\n\r\n") for payload in payloads]
        frames = [Frame(b",\r\n" if i else b"[", p, b"\n") for i, p in enumerate(payloads)]
        return [*frames, Frame(b"", b"", b"]")]

    def cached(self, call: Call, prompt: Prompt, reply: Reply) -> None:
        implicit = call.env.cache.implicit(self.name, prompt.segments)
        reply.usage.cache_read = max(implicit, call.options.get("cached_tokens", 0))


def _listed(model: str, name: str, context: int, output: int) -> dict[str, Any]:
    methods = ["generateContent", "countTokens", "streamGenerateContent"]
    return {
        "name": f"models/{model}",
        "version": "001",
        "displayName": name,
        "inputTokenLimit": context,
        "outputTokenLimit": output,
        "supportedGenerationMethods": methods,
    }


def _turn(i: int, content: dict[str, Any]) -> Turn:
    turn = Turn(role="assistant" if content.get("role") == "model" else "user")
    texts = []
    for j, part in enumerate(content["parts"]):
        if "functionCall" in part:
            called = part["functionCall"]
            called_id = str(called.get("id") or f"{i}:{j}")
            turn.calls.append(CallIn(called_id, called["name"], called.get("args") or {}))
        elif "functionResponse" in part:
            answer = part["functionResponse"]
            answer_id, text = str(answer.get("id") or ""), _result_text(answer)
            response = answer.get("response")
            failed = isinstance(response, dict) and list(response) == ["error"]
            turn.results.append(ResultIn(answer_id, text, answer.get("name"), failed))
        elif isinstance(part.get("text"), str) and part.get("thought") is not True:
            texts.append(part["text"])
    turn.text = "\n".join(texts)
    return turn


def _result_text(response: dict[str, Any]) -> str:
    """A function response's text: ``{"output": "..."}`` (or result, content, ...) unwrapped."""
    value = response.get("response")
    if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), str):
        return str(next(iter(value.values())))
    return text_of(value)
