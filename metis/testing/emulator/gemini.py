"""Gemini API: ``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent``
(``?alt=sse`` for SSE, otherwise a streamed JSON array) and ``:countTokens``.

Auth: ``x-goog-api-key`` or ``?key=`` (403 ``PERMISSION_DENIED`` without one; a refused key is
400 ``INVALID_ARGUMENT`` with reason ``API_KEY_INVALID``, as Gemini answers). Field names are
read in either proto-JSON spelling (``functionCall`` / ``function_call``). Validated like the
real API: unknown fields, ``contents`` (roles, non-empty parts, known part fields), function
call turns following a user or function-response turn, function response turns following a
call turn with as many responses as calls, Gemini 3's thought signatures on function calls,
function names, ``temperature``.

Streams are ``data:`` SSE separated by ``\\r\\n\\r\\n`` (as recorded), JSON with ``": "``
separators, ``usageMetadata`` on every chunk, function calls whole (with no id) in one chunk,
thought parts (``thought: true``) first when ``thinkingConfig.includeThoughts``, and a
``thoughtSignature`` on the first part after thinking.
"""

from __future__ import annotations

import json
import re
from typing import Any

from metis.testing.emulator import files
from metis.testing.emulator._wire import (
    ApiError,
    Env,
    Frame,
    HttpRequest,
    Ids,
    JsonReply,
    Provider,
    StreamReply,
    is_number,
    parse_json_object,
    signature,
    split_text,
    text_of,
)
from metis.testing.emulator.responder import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn

PATH = re.compile(
    r"^/(v1|v1beta|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$"
)
TOP_LEVEL = frozenset(
    [
        "contents",
        "tools",
        "toolConfig",
        "safetySettings",
        "systemInstruction",
        "generationConfig",
        "cachedContent",
        "labels",
        "model",
    ]
)
PART_FIELDS = frozenset(
    [
        "text",
        "thought",
        "thoughtSignature",
        "inlineData",
        "fileData",
        "functionCall",
        "functionResponse",
        "executableCode",
        "codeExecutionResult",
        "videoMetadata",
        "partMetadata",
        "mediaResolution",
    ]
)
SIGNATURE_KIND = "gemini-thought"
SEPARATORS = (",", ": ")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` under its camelCase or snake_case spelling."""
    if not isinstance(obj, dict):
        return default
    if name in obj:
        return obj[name]
    return obj.get(_snake(name), default)


def _keys(obj: dict[str, Any]) -> set[str]:
    return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k) for k in obj}


def google_error(
    status: int, state: str, message: str, details: list[dict[str, Any]] | None = None
) -> JsonReply:
    error: dict[str, Any] = {"code": status, "message": message, "status": state}
    if details:
        error["details"] = details
    return JsonReply(
        status,
        {"error": error},
        {"content-type": "application/json; charset=UTF-8", "vary": "Origin, X-Origin, Referer"},
        indent=2,
        separators=SEPARATORS,
    )


def invalid(message: str) -> JsonReply:
    return google_error(400, "INVALID_ARGUMENT", message)


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=SEPARATORS).encode()


class Gemini(Provider):
    name = "gemini"

    def route(self, method: str, path: str) -> str | None:
        match = PATH.match(path)
        return match.group(3) if match and method == "POST" else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if PATH.match(path) else []

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        key = request.header("x-goog-api-key") or request.query.get("key")
        if not key:
            return google_error(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established identity)."
                " Please use API Key or other form of API consumer identity to call this API.",
            )
        if keys is not None and key not in keys:
            return self._bad_key()
        return None

    @staticmethod
    def _bad_key() -> JsonReply:
        return google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                },
                {
                    "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                    "locale": "en-US",
                    "message": "API key not valid. Please pass a valid API key.",
                },
            ],
        )

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            return google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "You exceeded your current quota, please check your plan and billing details. For "
                "more information on this error, head to: https://ai.google.dev/gemini-api/docs/"
                "rate-limits.",
                [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            {
                                "quotaMetric": "generativelanguage.googleapis.com/"
                                "generate_content_requests",
                                "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
                                "quotaValue": "10",
                            }
                        ],
                    },
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{retry_after:g}s",
                    },
                ],
            )
        if kind == "overloaded":
            return google_error(
                503, "UNAVAILABLE", "The model is overloaded. Please try again later."
            )
        if kind == "server_error":
            return google_error(
                500,
                "INTERNAL",
                "An internal error has occurred. Please retry or report in "
                "https://developers.generativeai.google/guide/troubleshooting",
            )
        if kind == "auth":
            return self._bad_key()
        return invalid(
            "The input token count (1048577) exceeds the maximum number of tokens "
            "allowed (1048576)."
        )

    def _stream_error(self, kind: str) -> dict[str, Any]:
        status, state, message = {
            "rate_limit": (
                429,
                "RESOURCE_EXHAUSTED",
                "Resource has been exhausted (e.g. check quota).",
            ),
            "overloaded": (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        }.get(
            kind,
            (
                500,
                "INTERNAL",
                "An internal error has occurred. Please retry or report in "
                "https://developers.generativeai.google/guide/troubleshooting",
            ),
        )
        return {"error": {"code": status, "message": message, "status": state}}

    # --- requests -------------------------------------------------------------------------

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        model = PATH.match(request.path).group(2)  # type: ignore[union-attr]
        body = parse_json_object(request, invalid)
        if endpoint == "countTokens":
            inner = field(body, "generateContentRequest")
            body = inner if isinstance(inner, dict) else body
        prompt, opts = self.prompt(model, body)
        if endpoint == "countTokens":
            total = sum((len(s) + 3) // 4 for s in prompt.segments) or 1
            return JsonReply(
                200,
                {
                    "totalTokens": total,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
                },
                {"content-type": "application/json; charset=UTF-8"},
                indent=2,
                separators=SEPARATORS,
            )
        reply = env.responder.reply(prompt)
        limit = env.context_tokens.get(self.name, 1_048_576)
        if reply.usage.input_tokens > limit:
            raise ApiError(
                invalid(
                    f"The input token count ({reply.usage.input_tokens}) exceeds the "
                    f"maximum number of tokens allowed ({limit})."
                )
            )
        reply.usage.cache_read = env.responder.cache.implicit(self.name, prompt.segments)
        ids = Ids(request.digest)
        response_id = ids.token(22, "alnum")
        parts = self._parts(reply, opts)
        headers = {"vary": "Origin, X-Origin, Referer", "server-timing": "gfet4t7; dur=1"}
        if endpoint == "streamGenerateContent":
            chunks = self._chunks(model, response_id, reply, parts)
            if request.query.get("alt") == "sse":
                frames = [Frame(b"data: ", _json(c), b"\r\n\r\n") for c in chunks]
                return StreamReply(
                    frames,
                    {
                        **headers,
                        "content-type": "text/event-stream",
                        "content-disposition": "attachment",
                    },
                    lambda kind: [Frame(b"data: ", _json(self._stream_error(kind)), b"\r\n\r\n")],
                )
            frames = [
                Frame(b"[" if i == 0 else b",\r\n", _json(c), b"\n") for i, c in enumerate(chunks)
            ]
            frames.append(Frame(b"", b"", b"]"))
            return StreamReply(
                frames,
                {**headers, "content-type": "application/json; charset=UTF-8"},
                lambda kind: [Frame(b",\r\n", _json(self._stream_error(kind)), b"\n]")],
            )
        body_out = {
            "candidates": [
                {
                    "content": {"parts": parts, "role": "model"},
                    "finishReason": _finish(reply),
                    "index": 0,
                }
            ],
            "usageMetadata": _usage(reply, reply.usage.output_tokens - reply.usage.thinking_tokens),
            "modelVersion": model,
            "responseId": response_id,
        }
        return JsonReply(
            200,
            body_out,
            {**headers, "content-type": "application/json; charset=UTF-8"},
            indent=2,
            separators=SEPARATORS,
        )

    def prompt(self, model: str, body: dict[str, Any]) -> tuple[Prompt, dict[str, Any]]:
        def bad(message: str) -> ApiError:
            return ApiError(invalid(message))

        for key in _keys(body):
            if key not in TOP_LEVEL:
                raise bad(
                    f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.'
                )
        contents = field(body, "contents")
        if not isinstance(contents, list) or not contents:
            raise bad("* GenerateContentRequest.contents: contents is not specified\n")
        refused = files.gemini(body, model)
        if refused is not None:
            raise bad(refused)
        config = field(body, "generationConfig") or {}
        if not isinstance(config, dict):
            raise bad("Invalid value at 'generation_config': expected an object.")
        temperature = field(config, "temperature")
        if temperature is not None and (not is_number(temperature) or not 0 <= temperature <= 2):
            raise bad(
                "* GenerateContentRequest.generation_config.temperature: must be in [0.0, 2.0]\n"
            )
        thinking_config = field(config, "thinkingConfig") or {}
        budget = field(thinking_config, "thinkingBudget")
        thinks = bool(re.search(r"2\.5|gemini-3|thinking", model)) and budget != 0
        include_thoughts = field(thinking_config, "includeThoughts") is True

        tools = self._tools(field(body, "tools"), bad)
        calling = field(field(body, "toolConfig") or {}, "functionCallingConfig") or {}
        mode = str(field(calling, "mode", "AUTO")).upper()
        allowed = field(calling, "allowedFunctionNames")
        tool_choice = {"ANY": "required", "NONE": "none", "VALIDATED": "auto"}.get(mode, "auto")
        if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
            tool_choice = f"tool:{allowed[0]}"

        system_instruction = field(body, "systemInstruction")
        system = text_of(field(system_instruction, "parts")) if system_instruction else ""
        turns, segments = self._contents(contents, model, bad)
        segments.insert(0, json.dumps(field(body, "tools") or []) + system)

        schema = field(config, "responseJsonSchema") or field(config, "responseSchema")
        mime = field(config, "responseMimeType")
        max_tokens = field(config, "maxOutputTokens")
        prompt = Prompt(
            model=model,
            turns=turns,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            thinking=thinks,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            output_schema=schema if isinstance(schema, dict) else None,
            json_mode=mime == "application/json",
            segments=segments,
        )
        # a thought signature comes back when the model thought and could call a function
        # (Gemini 2.5), and always on Gemini 3
        signed = thinks and (bool(tools) or model.startswith("gemini-3"))
        return prompt, {"include_thoughts": include_thoughts, "signed": signed}

    @staticmethod
    def _tools(raw: Any, bad: Any) -> list[ToolSpec]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise bad("Invalid value at 'tools': expected a list.")
        tools: list[ToolSpec] = []
        for i, tool in enumerate(raw):
            declarations = field(tool, "functionDeclarations") or []
            for j, decl in enumerate(declarations):
                name = field(decl, "name")
                if not isinstance(name, str) or not re.fullmatch(
                    r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}", name
                ):
                    raise bad(
                        f"* GenerateContentRequest.tools[{i}].function_declarations[{j}].name: "
                        "Invalid function name. Must start with a letter or an underscore. Must be "
                        "a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a "
                        "maximum length of 64.\n"
                    )
                schema = field(decl, "parametersJsonSchema") or field(decl, "parameters") or {}
                description = field(decl, "description")
                tools.append(
                    ToolSpec(
                        name,
                        description if isinstance(description, str) else "",
                        schema if isinstance(schema, dict) else {},
                    )
                )
        return tools

    @staticmethod
    def _contents(contents: list[Any], model: str, bad: Any) -> tuple[list[Turn], list[str]]:
        turns: list[Turn] = []
        segments: list[str] = []
        previous_calls = 0
        previous_kind = ""  # user | calls | responses | model
        gemini3 = model.startswith("gemini-3")
        for i, content in enumerate(contents):
            if not isinstance(content, dict):
                raise bad(f"Invalid value at 'contents[{i}]': expected an object.")
            segments.append(json.dumps(content, ensure_ascii=False))
            role = field(content, "role", "user")
            if role not in ("user", "model", "function", "tool"):
                raise bad("Please use a valid role: user, model.")
            parts = field(content, "parts")
            if not isinstance(parts, list) or not parts:
                raise bad(
                    f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be "
                    "empty.\n"
                )
            texts: list[str] = []
            calls: list[CallIn] = []
            results: list[ResultIn] = []
            signed = False
            for j, part in enumerate(parts):
                if not isinstance(part, dict):
                    raise bad(f"Invalid value at 'contents[{i}].parts[{j}]': expected an object.")
                for key in _keys(part):
                    if key not in PART_FIELDS:
                        raise bad(
                            f'Invalid JSON payload received. Unknown name "{key}" at '
                            f"'contents[{i}].parts[{j}]': Cannot find field."
                        )
                call = field(part, "functionCall")
                response = field(part, "functionResponse")
                if isinstance(call, dict):
                    name = field(call, "name")
                    if not isinstance(name, str):
                        raise bad(
                            f"* GenerateContentRequest.contents[{i}].parts[{j}].function_call"
                            ".name: Name cannot be empty.\n"
                        )
                    sig = field(part, "thoughtSignature")
                    if gemini3 and not calls and not sig:
                        raise bad(
                            "Function call is missing a thought_signature in functionCall parts. "
                            "This is required for tools to work correctly, and missing "
                            "thought_signature may lead to degraded model performance. Additional "
                            f"data, function call `default_api:{name}` , position {i + 1}. Please "
                            "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for "
                            "more details."
                        )
                    signed = signed or bool(sig)
                    calls.append(
                        CallIn(
                            str(field(call, "id") or f"{i}:{j}"), name, field(call, "args") or {}
                        )
                    )
                elif isinstance(response, dict):
                    name = field(response, "name")
                    results.append(
                        ResultIn(str(field(response, "id") or ""), _result_text(response), name)
                    )
                elif isinstance(field(part, "text"), str) and field(part, "thought") is not True:
                    texts.append(field(part, "text"))
            if calls:
                if previous_kind not in ("user", "responses"):
                    raise bad(
                        "Please ensure that function call turn comes immediately after a user "
                        "turn or after a function response turn."
                    )
                kind = "calls"
            elif results:
                if previous_kind != "calls":
                    raise bad(
                        "Please ensure that function response turn comes immediately after a "
                        "function call turn."
                    )
                if len(results) != previous_calls:
                    raise bad(
                        "Please ensure that the number of function response parts is equal to "
                        "the number of function call parts of the function call turn."
                    )
                kind = "responses"
            else:
                kind = "model" if role == "model" else "user"
            previous_calls = len(calls)
            previous_kind = kind
            turn = Turn(
                role="assistant" if role == "model" else "user",
                text="\n".join(texts),
                calls=calls,
                results=results,
            )
            turns.append(turn)
        return turns, segments

    # --- replies --------------------------------------------------------------------------

    @staticmethod
    def _parts(reply: Reply, opts: dict[str, Any]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if reply.thinking and opts["include_thoughts"]:
            parts.append({"text": reply.thinking, "thought": True})
        if reply.text:
            parts.append({"text": reply.text})
        for call in reply.calls:
            parts.append({"functionCall": {"name": call.name, "args": call.args}})
        if reply.thinking and opts["signed"]:
            first = next((p for p in parts if not p.get("thought")), None)
            if first is not None:
                first["thoughtSignature"] = signature(SIGNATURE_KIND, reply.thinking)
        return parts

    @staticmethod
    def _chunks(
        model: str, response_id: str, reply: Reply, parts: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        pieces: list[dict[str, Any]] = []
        for part in parts:
            if "functionCall" in part:
                if pieces and "functionCall" in pieces[-1]["parts"][0]:
                    pieces[-1]["parts"].append(part)
                else:
                    pieces.append({"parts": [part]})
                continue
            extra = {k: v for k, v in part.items() if k != "text"}
            for n, text in enumerate(split_text(part["text"])):
                piece: dict[str, Any] = {"text": text}
                if part.get("thought"):
                    piece["thought"] = True
                elif n == 0:
                    piece.update(extra)
                pieces.append({"parts": [piece]})
        if not pieces or "functionCall" in pieces[-1]["parts"][0]:
            pieces.append({"parts": [{"text": ""}]})
        chunks: list[dict[str, Any]] = []
        visible_total = reply.usage.output_tokens - reply.usage.thinking_tokens
        seen = 0
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            for shown in piece["parts"]:
                if not shown.get("thought"):
                    seen += len(shown.get("text", "")) // 4 + (5 if "functionCall" in shown else 0)
            candidate: dict[str, Any] = {"content": {"parts": piece["parts"], "role": "model"}}
            if last:
                candidate["finishReason"] = _finish(reply)
            candidate["index"] = 0
            chunks.append(
                {
                    "candidates": [candidate],
                    "usageMetadata": _usage(
                        reply, visible_total if last else min(seen, visible_total)
                    ),
                    "modelVersion": model,
                    "responseId": response_id,
                }
            )
        return chunks


def _result_text(response: dict[str, Any]) -> str:
    """A function response's text: ``{"output": "..."}`` (or result, content, ...) unwrapped."""
    value = field(response, "response")
    if isinstance(value, dict) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, str):
            return inner
    return text_of(value)


def _finish(reply: Reply) -> str:
    return "MAX_TOKENS" if reply.stop == "max_tokens" else "STOP"


def _usage(reply: Reply, candidates: int) -> dict[str, Any]:
    usage = reply.usage
    out: dict[str, Any] = {"promptTokenCount": usage.input_tokens}
    if candidates:
        out["candidatesTokenCount"] = candidates
    out["totalTokenCount"] = usage.input_tokens + candidates + usage.thinking_tokens
    if usage.cache_read:
        out["cachedContentTokenCount"] = usage.cache_read
    out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.input_tokens}]
    if usage.cache_read:
        out["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.cache_read}]
    if usage.thinking_tokens:
        out["thoughtsTokenCount"] = usage.thinking_tokens
    return out
