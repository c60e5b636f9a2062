"""OpenAI Chat Completions: ``POST /v1/chat/completions`` (also at ``/chat/completions``,
``/openai/v1/chat/completions`` and ``/api/v1/chat/completions``, where DeepSeek, Groq and
OpenRouter serve the same format).

Auth: ``Authorization: Bearer <key>`` (401 ``invalid_api_key`` style errors otherwise).
Validated like the real API: unrecognized top-level arguments, ``model``, ``messages`` (roles,
content part types, ``tool`` messages answering the preceding ``tool_calls`` and every call
answered, arguments as strings), tools (name pattern, and in ``strict`` mode the schema rules:
``additionalProperties: false`` and every property required, at every level), ``tool_choice``,
``stream_options`` only with ``stream``, ``temperature``, ``max_tokens`` refused for reasoning
models, ``json_object`` needing the word "json" in the messages.

Streams are ``data:``-only SSE ending in ``data: [DONE]``: the tool call ``id`` and ``name`` only
on the first fragment of each index, the finish_reason chunk, then (only when
``stream_options.include_usage``) a usage chunk with ``choices: []``; chunks carry
``obfuscation`` padding unless ``stream_options.include_obfuscation`` is false.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
    dumps,
    is_int,
    is_number,
    now_unix,
    parse_json_object,
    split_json,
    split_text,
    sse,
    text_of,
)
from metis.testing.emulator.responder import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn

TOP_LEVEL = frozenset(
    [
        "model",
        "messages",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    ]
)
ROLES = ("system", "assistant", "user", "function", "tool", "developer")
PART_TYPES = ("text", "image_url", "input_audio", "refusal", "audio", "file")
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
# DeepSeek thinking mode: reasoning streams as `reasoning_content`, and every assistant message
# that made tool calls must carry its `reasoning_content` back in later requests.
DEEPSEEK_THINKING = re.compile(r"^deepseek-reasoner")
FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
# OpenAI's path, and where OpenAI-compatible APIs serve the same format (DeepSeek, Groq,
# OpenRouter; Mistral, Together, vLLM, llama.cpp and TGI use OpenAI's own)
PATHS = frozenset(
    {
        "/v1/chat/completions",
        "/chat/completions",
        "/openai/v1/chat/completions",
        "/api/v1/chat/completions",
    }
)


# --- OpenAI's errors and auth, shared with the Responses API ------------------------------------


def openai_error(
    status: int,
    message: str,
    request: HttpRequest,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JsonReply:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JsonReply(status, body, {**openai_headers(request), **(headers or {})})


def openai_headers(request: HttpRequest) -> dict[str, str]:
    return {
        "x-request-id": "req_"
        + Ids(request.digest + request.number.to_bytes(8, "big")).token(32, "hex"),
        "openai-organization": "emulator-org",
        "openai-processing-ms": "1",
        "openai-version": "2020-10-01",
        "access-control-expose-headers": "X-Request-ID",
    }


def openai_authenticate(request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
    auth = request.header("authorization") or ""
    scheme, _, key = auth.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        return openai_error(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password "
            "field (with blank username) if you're accessing the API from your browser and are "
            "prompted for a username. You can obtain an API key from "
            "https://platform.openai.com/account/api-keys.",
            request,
        )
    if keys is not None and key not in keys:
        return invalid_key(request, key)
    return None


def invalid_key(request: HttpRequest, key: str = "sk-emulator") -> JsonReply:
    shown = key[:3] + "*" * 4 + key[-4:] if len(key) > 8 else key[:1] + "***"
    return openai_error(
        401,
        f"Incorrect API key provided: {shown}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        request,
        code="invalid_api_key",
    )


def openai_fault(kind: str, request: HttpRequest, retry_after: float, model: str) -> JsonReply:
    if kind == "rate_limit":
        wait = f"{retry_after:g}s"
        return openai_error(
            429,
            f"Rate limit reached for {model} in organization org-emulator on requests per min "
            f"(RPM): Limit 500, Used 500, Requested 1. Please try again in {wait}. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            request,
            kind="requests",
            code="rate_limit_exceeded",
            headers={
                "retry-after": f"{retry_after:g}",
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": wait,
            },
        )
    if kind == "overloaded":
        return openai_error(
            503, "The server is overloaded or not ready yet.", request, kind="server_error"
        )
    if kind == "server_error":
        return openai_error(
            500,
            "The server had an error while processing your request. Sorry about that!",
            request,
            kind="server_error",
        )
    if kind == "auth":
        return invalid_key(request)
    return openai_error(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 131072 tokens. Please reduce the length of the messages.",
        request,
        param="messages",
        code="context_length_exceeded",
    )


def stream_error_body(kind: str) -> dict[str, Any]:
    if kind == "rate_limit":
        return {
            "message": "Rate limit reached. Please try again later.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    if kind == "overloaded":
        return {
            "message": "The server is overloaded or not ready yet.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    return {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }


def model_of(request: HttpRequest) -> str:
    match = re.search(rb'"model"\s*:\s*"([^"]{1,100})"', request.body)
    return match.group(1).decode(errors="replace") if match else "gpt-4o"


def json_schema_format(
    spec: Any, where: str, schema_param: str, bad: Callable[[str, str, str], Exception]
) -> dict[str, Any]:
    """The schema of a ``json_schema`` output format (Chat's ``response_format.json_schema``,
    Responses' ``text.format``), refused as OpenAI does when unnamed or not strict-valid."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise bad(
            f"Missing required parameter: '{where}.name'.",
            f"{where}.name",
            "missing_required_parameter",
        )
    given = spec.get("schema")
    schema: dict[str, Any] = given if isinstance(given, dict) else {}
    if spec.get("strict") is True:
        problem = strict_schema_problem(schema)
        if problem:
            raise bad(
                f"Invalid schema for response_format '{spec['name']}': {problem}",
                schema_param,
                "invalid_json_schema",
            )
    return schema


def strict_schema_problem(schema: Any, path: str = "()") -> str | None:
    """What OpenAI's strict mode refuses in a schema (None: nothing)."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if is_object:
        if schema.get("additionalProperties") is not False:
            return (
                f"In context={path}, 'additionalProperties' is required to be supplied and "
                "to be false."
            )
        props = schema.get("properties") or {}
        required = schema.get("required") or []
        missing = [p for p in props if p not in required]
        if missing:
            return (
                f"In context={path}, 'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'."
            )
        for name, sub in props.items():
            problem = strict_schema_problem(sub, f"('properties', '{name}')")
            if problem:
                return problem
    for key in ("items", "anyOf", "allOf"):
        sub = schema.get(key)
        subs = sub if isinstance(sub, list) else [sub]
        for item in subs:
            problem = strict_schema_problem(item, f"('{key}',)")
            if problem:
                return problem
    for name, sub in (schema.get("$defs") or schema.get("definitions") or {}).items():
        problem = strict_schema_problem(sub, f"('$defs', '{name}')")
        if problem:
            return problem
    return None


def check_temperature(value: Any, bad: Any) -> None:
    if value is None:
        return
    if not is_number(value):
        raise bad(
            f"Invalid type for 'temperature': expected a decimal, but got {type(value).__name__} "
            "instead.",
            "temperature",
            "invalid_type",
        )
    if value > 2:
        raise bad(
            f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but "
            f"got {value} instead.",
            "temperature",
            "decimal_above_max_value",
        )
    if value < 0:
        raise bad(
            f"Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but "
            f"got {value} instead.",
            "temperature",
            "decimal_below_min_value",
        )


class OpenAIChat(Provider):
    name = "openai"

    def route(self, method: str, path: str) -> str | None:
        return "chat" if method == "POST" and path in PATHS else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if path in PATHS else []

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        return openai_authenticate(request, keys)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        return openai_fault(kind, request, retry_after, model_of(request))

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        body = parse_json_object(request, lambda m: openai_error(400, m, request))
        prompt, opts = self.prompt(body, request)
        reply = env.responder.reply(prompt)
        limit = env.context_tokens.get(self.name, 128_000)
        if reply.usage.input_tokens > limit:
            raise ApiError(
                openai_error(
                    400,
                    f"This model's maximum context length is {limit} tokens. However, your "
                    f"messages resulted in {reply.usage.input_tokens} tokens. Please reduce the "
                    "length of the messages.",
                    request,
                    param="messages",
                    code="context_length_exceeded",
                )
            )
        reply.usage.cache_read = env.responder.cache.implicit(self.name, prompt.segments, 128)
        ids = Ids(request.digest)
        completion_id = "chatcmpl-" + ids.token(29)
        calls = [("call_" + ids.token(24), call) for call in reply.calls]
        fingerprint = "fp_" + ids.token(10, "hex")
        headers = openai_headers(request)
        if body.get("stream") is True:
            frames = self._chunks(
                completion_id, body["model"], fingerprint, reply, calls, opts, ids
            )
            return StreamReply(
                frames,
                {**headers, "content-type": "text/event-stream; charset=utf-8"},
                lambda kind: [sse({"error": stream_error_body(kind)})],
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
            "annotations": [],
        }
        if opts["reasoning_content"]:
            message["reasoning_content"] = reply.thinking
        if calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for cid, c in calls
            ]
        completion = {
            "id": completion_id,
            "object": "chat.completion",
            "created": now_unix(),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": FINISH[reply.stop],
                }
            ],
            "usage": _usage(reply),
            "service_tier": "default",
            "system_fingerprint": fingerprint,
        }
        return JsonReply(200, completion, {**headers, "content-type": "application/json"})

    # --- the request ----------------------------------------------------------------------

    def prompt(self, body: dict[str, Any], request: HttpRequest) -> tuple[Prompt, dict[str, Any]]:
        def bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
            return ApiError(openai_error(400, message, request, param=param, code=code))

        for key in body:
            if key not in TOP_LEVEL:
                raise bad(f"Unrecognized request argument supplied: {key}")
        refused = files.openai_chat(body)
        if refused is not None:
            raise bad(refused)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise bad("you must provide a model parameter")
        if "stream" in body and not isinstance(body["stream"], bool):
            raise bad(
                f"Invalid type for 'stream': expected a boolean, but got "
                f"{type(body['stream']).__name__} instead.",
                "stream",
                "invalid_type",
            )
        stream_options = body.get("stream_options")
        if stream_options is not None and body.get("stream") is not True:
            raise bad(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "stream_options",
            )
        check_temperature(body.get("temperature"), bad)
        reasoning = bool(REASONING_MODEL.match(model))
        if reasoning and "max_tokens" in body:
            raise bad(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not is_int(max_tokens) or max_tokens < 1):
            raise bad(
                f"Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, "
                f"but got {max_tokens} instead.",
                "max_tokens",
                "integer_below_min_value",
            )

        tools = self._tools(body.get("tools"), bad)
        tool_choice = self._tool_choice(body.get("tool_choice"), tools, bad)
        turns, segments, system = self._messages(body.get("messages"), bad)
        deepseek_thinking = bool(DEEPSEEK_THINKING.match(model))
        if deepseek_thinking:
            _check_reasoning_sent_back(body["messages"], bad)
        segments.insert(0, dumps(body.get("tools") or []).decode())

        schema: dict[str, Any] | None = None
        json_mode = False
        fmt = body.get("response_format")
        if isinstance(fmt, dict):
            if fmt.get("type") == "json_schema":
                schema = json_schema_format(
                    fmt.get("json_schema"), "response_format.json_schema", "response_format", bad
                )
            elif fmt.get("type") == "json_object":
                json_mode = True
                if "json" not in dumps(body.get("messages")).decode().lower():
                    raise bad(
                        "'messages' must contain the word 'json' in some form, to use "
                        "'response_format' of type 'json_object'.",
                        "messages",
                    )
        stream_options = stream_options if isinstance(stream_options, dict) else {}
        prompt = Prompt(
            model=model,
            turns=turns,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            parallel=body.get("parallel_tool_calls", True) is not False,
            thinking=reasoning or deepseek_thinking,
            max_tokens=max_tokens,
            output_schema=schema,
            json_mode=json_mode,
            segments=segments,
        )
        opts = {
            "reasoning_content": deepseek_thinking,
            "include_usage": stream_options.get("include_usage") is True,
            "obfuscation": stream_options.get("include_obfuscation", True) is not False,
        }
        return prompt, opts

    @staticmethod
    def _tools(raw: Any, bad: Any) -> list[ToolSpec]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise bad("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
        tools: list[ToolSpec] = []
        for i, tool in enumerate(raw):
            if not isinstance(tool, dict):
                raise bad(
                    f"Invalid type for 'tools[{i}]': expected an object.",
                    f"tools[{i}]",
                    "invalid_type",
                )
            if tool.get("type") != "function":
                if tool.get("type") == "custom":
                    continue
                raise bad(
                    f"Invalid value: '{tool.get('type')}'. Supported values are: 'function' "
                    "and 'custom'.",
                    f"tools[{i}].type",
                    "invalid_value",
                )
            function = tool.get("function")
            if not isinstance(function, dict):
                raise bad(
                    f"Missing required parameter: 'tools[{i}].function'.",
                    f"tools[{i}].function",
                    "missing_required_parameter",
                )
            name = function.get("name")
            if not isinstance(name, str):
                raise bad(
                    f"Missing required parameter: 'tools[{i}].function.name'.",
                    f"tools[{i}].function.name",
                    "missing_required_parameter",
                )
            if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
                raise bad(
                    f"Invalid 'tools[{i}].function.name': string does not match pattern. "
                    "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                    f"tools[{i}].function.name",
                    "invalid_value",
                )
            parameters = function.get("parameters", {"type": "object", "properties": {}})
            if not isinstance(parameters, dict):
                raise bad(
                    f"Invalid type for 'tools[{i}].function.parameters': expected an object.",
                    f"tools[{i}].function.parameters",
                    "invalid_type",
                )
            if function.get("strict") is True:
                problem = strict_schema_problem(parameters)
                if problem:
                    raise bad(
                        f"Invalid schema for function '{name}': {problem}",
                        f"tools[{i}].function.parameters",
                        "invalid_function_parameters",
                    )
            description = function.get("description")
            tools.append(
                ToolSpec(name, description if isinstance(description, str) else "", parameters)
            )
        return tools

    @staticmethod
    def _tool_choice(raw: Any, tools: list[ToolSpec], bad: Any) -> str:
        if raw is None:
            return "auto"
        if not tools:
            raise bad(
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' "
                "are specified.",
                "tool_choice",
            )
        if raw in ("none", "auto", "required"):
            return str(raw)
        if isinstance(raw, dict) and raw.get("type") == "function":
            name = (raw.get("function") or {}).get("name")
            if name not in {t.name for t in tools}:
                raise bad(
                    f"Invalid value for 'tool_choice': function '{name}' is not present in "
                    "'tools'.",
                    "tool_choice",
                )
            return f"tool:{name}"
        if isinstance(raw, dict) and raw.get("type") == "custom":  # a custom tool, never called
            return "auto"
        if isinstance(raw, dict) and raw.get("type") == "allowed_tools":
            return (
                "required" if (raw.get("allowed_tools") or {}).get("mode") == "required" else "auto"
            )
        raise bad(
            "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named "
            "function.",
            "tool_choice",
            "invalid_value",
        )

    @staticmethod
    def _messages(raw: Any, bad: Any) -> tuple[list[Turn], list[str], str]:
        if raw is None:
            raise bad(
                "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
            )
        if not isinstance(raw, list):
            raise bad(
                "Invalid type for 'messages': expected an array of objects.",
                "messages",
                "invalid_type",
            )
        if not raw:
            raise bad(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                "messages",
                "empty_array",
            )
        turns: list[Turn] = []
        segments: list[str] = []
        system: list[str] = []
        open_calls: dict[str, str] = {}  # id -> name: the last assistant's calls not yet answered
        answering: dict[str, str] | None = None  # the calls tool messages may answer now
        open_at = -1
        for i, message in enumerate(raw):
            if not isinstance(message, dict):
                raise bad(
                    f"Invalid type for 'messages[{i}]': expected an object.",
                    f"messages[{i}]",
                    "invalid_type",
                )
            role = message.get("role")
            if role not in ROLES:
                raise bad(
                    f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                    "'user', 'function', 'tool', and 'developer'.",
                    f"messages[{i}].role",
                    "invalid_value",
                )
            if open_calls and role != "tool":
                raise bad(
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(open_calls)}",
                    f"messages.[{open_at}].role",
                )
            content = message.get("content")
            if role in ("user", "system", "developer", "tool") and content is None:
                raise bad(
                    f"Missing required parameter: 'messages[{i}].content'.",
                    f"messages[{i}].content",
                    "missing_required_parameter",
                )
            if isinstance(content, list):
                for j, part in enumerate(content):
                    kind = part.get("type") if isinstance(part, dict) else None
                    if kind not in PART_TYPES:
                        raise bad(
                            f"Invalid value: '{kind}'. Supported values are: 'text', "
                            "'image_url', 'input_audio', 'refusal', 'audio', and 'file'.",
                            f"messages[{i}].content[{j}].type",
                            "invalid_value",
                        )
            elif content is not None and not isinstance(content, str):
                raise bad(
                    f"Invalid type for 'messages[{i}].content': expected one of a string or "
                    "array of objects.",
                    f"messages[{i}].content",
                    "invalid_type",
                )
            text = text_of(content)
            segments.append(dumps(message).decode())
            if role in ("system", "developer"):
                system.append(text)
                continue
            if role == "tool":
                call_id = message.get("tool_call_id")
                if not isinstance(call_id, str):
                    raise bad(
                        f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                        f"messages[{i}].tool_call_id",
                        "missing_required_parameter",
                    )
                if answering is None:
                    raise bad(
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.",
                        f"messages.[{i}].role",
                    )
                if call_id not in answering:
                    raise bad(
                        f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                        "'tool_calls' of previous message.",
                        f"messages.[{i}].tool_call_id",
                    )
                result = ResultIn(call_id, text, answering[call_id])
                open_calls.pop(call_id, None)
                if turns and turns[-1].role == "user" and turns[-1].results:
                    turns[-1].results.append(result)
                else:
                    turns.append(Turn(role="user", results=[result]))
                continue
            answering = None
            if role == "function":
                turns.append(Turn(role="user", results=[ResultIn("", text, message.get("name"))]))
                continue
            turn = Turn(role="user" if role == "user" else "assistant", text=text)
            if role == "assistant":
                calls = message.get("tool_calls") or []
                if not isinstance(calls, list):
                    raise bad(
                        f"Invalid type for 'messages[{i}].tool_calls': expected an array.",
                        f"messages[{i}].tool_calls",
                        "invalid_type",
                    )
                for j, call in enumerate(calls):
                    where = f"messages[{i}].tool_calls[{j}]"
                    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                        raise bad(
                            f"Missing required parameter: '{where}.id'.",
                            f"{where}.id",
                            "missing_required_parameter",
                        )
                    function = call.get("function")
                    custom = call.get("custom")
                    if call.get("type") == "custom" and isinstance(custom, dict):
                        function = {"name": custom.get("name"), "arguments": custom.get("input")}
                    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                        raise bad(
                            f"Missing required parameter: '{where}.function'.",
                            f"{where}.function",
                            "missing_required_parameter",
                        )
                    arguments = function.get("arguments")
                    if not isinstance(arguments, str):
                        raise bad(
                            f"Invalid type for '{where}.function.arguments': expected a "
                            f"string, but got {type(arguments).__name__} instead.",
                            f"{where}.function.arguments",
                            "invalid_type",
                        )
                    turn.calls.append(CallIn(call["id"], function["name"], arguments))
                    open_calls[call["id"]] = function["name"]
                open_at = i
                answering = dict(open_calls) if open_calls else None
            turns.append(turn)
        if open_calls:
            raise bad(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}",
                f"messages.[{open_at}].role",
            )
        return turns, segments, "\n".join(system)

    # --- the stream -----------------------------------------------------------------------

    @staticmethod
    def _chunks(
        completion_id: str,
        model: str,
        fingerprint: str,
        reply: Reply,
        calls: list[tuple[str, Any]],
        opts: dict[str, Any],
        ids: Ids,
    ) -> list[Frame]:
        created = now_unix()
        frames: list[Frame] = []

        def chunk(
            delta: dict[str, Any] | None,
            finish: str | None = None,
            usage: dict[str, Any] | None = None,
        ) -> None:
            data: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "service_tier": "default",
                "system_fingerprint": fingerprint,
                "choices": []
                if delta is None
                else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if opts["include_usage"]:
                data["usage"] = usage
            if opts["obfuscation"]:
                data["obfuscation"] = ids.token(1 + len(frames) % 15)
            frames.append(sse(data))

        if opts["reasoning_content"]:
            chunk({"role": "assistant", "content": None, "reasoning_content": ""})
            for piece in split_text(reply.thinking):
                chunk({"reasoning_content": piece})
        pieces = split_text(reply.text)
        if calls and not pieces:
            cid, call = calls[0]
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": cid,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ],
                    "refusal": None,
                }
            )
        else:
            chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in pieces:
            chunk({"content": piece})
        for index, (cid, call) in enumerate(calls):
            if index or pieces:
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": cid,
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                )
            for fragment in split_json(call.arguments):
                chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        chunk({}, FINISH[reply.stop])
        if opts["include_usage"]:
            chunk(None, usage=_usage(reply))
        frames.append(Frame(b"data: ", b"[DONE]", b"\n\n"))
        return frames


def _check_reasoning_sent_back(messages: list[Any], bad: Any) -> None:
    for i, message in enumerate(messages):
        if (
            message.get("role") == "assistant"
            and message.get("tool_calls")
            and not (
                isinstance(message.get("reasoning_content"), str) and message["reasoning_content"]
            )
        ):
            raise bad(
                "The reasoning_content in the thinking mode must be passed back to the API.",
                f"messages[{i}].reasoning_content",
            )


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.thinking_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
