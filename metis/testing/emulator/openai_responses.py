"""OpenAI Responses API: ``POST /v1/responses``.

Auth as OpenAI Chat (Bearer). Validated like the real API: unknown parameters, ``model``,
``input`` (a string or items: messages, ``function_call``, ``function_call_output``,
``reasoning``), every ``function_call_output`` answering a call and every call answered,
function tools declared flat (``name`` at the top level, not under ``function``), strict
schemas, ``tool_choice``, ``temperature``, ``max_output_tokens >= 16``, ``previous_response_id``
(responses are stored unless ``store: false``) and reasoning items' ``encrypted_content`` (only
what this emulator issued verifies).

Streams are ``event:`` + ``data:`` SSE with ``sequence_number``: ``response.created``,
``response.in_progress``, per output item ``output_item.added`` ... ``output_item.done``
(reasoning summary parts and deltas, ``output_text`` deltas, ``function_call_arguments``
deltas), then ``response.completed`` (``response.incomplete`` when max_output_tokens cut it).
Reasoning appears when the request has ``reasoning`` (its summary when ``reasoning.summary`` is
set, ``encrypted_content`` when ``include`` asks for it).
"""

from __future__ import annotations

import base64
import json
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
    now_unix,
    parse_json_object,
    sign,
    split_json,
    split_text,
    sse,
    text_of,
)
from metis.testing.emulator.count_tokens import input_tokens
from metis.testing.emulator.openai_chat import (
    REASONING_MODEL,
    check_temperature,
    json_schema_format,
    model_of,
    openai_authenticate,
    openai_error,
    openai_fault,
    openai_headers,
    strict_schema_problem,
)
from metis.testing.emulator.responder import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn

TOP_LEVEL = frozenset(
    [
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "max_tool_calls",
        "temperature",
        "top_p",
        "top_logprobs",
        "stream",
        "stream_options",
        "store",
        "metadata",
        "reasoning",
        "text",
        "include",
        "previous_response_id",
        "truncation",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "service_tier",
        "background",
        "prompt",
        "conversation",
    ]
)
ENCRYPTED_PREFIX = "gAAAAAB"
SIGNATURE_KIND = "openai-reasoning"
MAX_STORED = 1000


def encrypt(summary: str) -> str:
    payload = json.dumps(
        {"s": summary, "m": base64.b64encode(sign(SIGNATURE_KIND, summary)).decode()}
    )
    return ENCRYPTED_PREFIX + base64.urlsafe_b64encode(payload.encode()).decode()


def decrypts(content: str) -> bool:
    if not content.startswith(ENCRYPTED_PREFIX):
        return False
    try:
        payload = json.loads(base64.urlsafe_b64decode(content[len(ENCRYPTED_PREFIX) :].encode()))
        mac = base64.b64decode(payload["m"])
        return isinstance(payload["s"], str) and mac == sign(SIGNATURE_KIND, payload["s"])
    except (ValueError, KeyError, TypeError):
        return False


class OpenAIResponses(Provider):
    name = "openai_responses"

    def route(self, method: str, path: str) -> str | None:
        if method == "POST" and path == "/v1/responses/input_tokens":
            return "input_tokens"
        return "responses" if method == "POST" and path == "/v1/responses" else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if path in ("/v1/responses", "/v1/responses/input_tokens") else []

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        return openai_authenticate(request, keys)

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "context_overflow":
            return openai_error(
                400,
                "Your input exceeds the context window of this model. Please adjust your input "
                "and try again.",
                request,
                param="input",
                code="context_length_exceeded",
            )
        return openai_fault(kind, request, retry_after, model_of(request))

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        body = parse_json_object(request, lambda m: openai_error(400, m, request))
        if endpoint == "input_tokens":
            return input_tokens(self, body, request, env)
        prompt, items, opts = self.prompt(body, request, env)
        reply = env.responder.reply(prompt)
        limit = env.context_tokens.get(self.name, 400_000)
        if reply.usage.input_tokens > limit:
            raise ApiError(
                openai_error(
                    400,
                    "Your input exceeds the context window of this model. Please adjust your input "
                    "and try again.",
                    request,
                    param="input",
                    code="context_length_exceeded",
                )
            )
        reply.usage.cache_read = env.responder.cache.implicit(self.name, prompt.segments, 128)
        ids = Ids(request.digest)
        response = self._response(body, reply, ids, opts)
        if body.get("store") is not False:
            with env.lock:
                env.responses[response["id"]] = items + response["output"]
                while len(env.responses) > MAX_STORED:
                    env.responses.pop(next(iter(env.responses)))
        headers = openai_headers(request)
        if body.get("stream") is True:
            frames = self._events(response, ids)
            return StreamReply(
                frames,
                {**headers, "content-type": "text/event-stream; charset=utf-8"},
                lambda kind: [self._failed(response, kind, len(frames))],
            )
        return JsonReply(200, response, {**headers, "content-type": "application/json"})

    # --- the request ----------------------------------------------------------------------

    def prompt(
        self, body: dict[str, Any], request: HttpRequest, env: Env
    ) -> tuple[Prompt, list[dict[str, Any]], dict[str, Any]]:
        def bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
            return ApiError(openai_error(400, message, request, param=param, code=code))

        for key in body:
            if key not in TOP_LEVEL:
                raise bad(f"Unknown parameter: '{key}'.", key, "unknown_parameter")
        refused = files.openai_responses(body.get("input"))
        if refused is not None:
            raise bad(refused)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise bad("Missing required parameter: 'model'.", "model", "missing_required_parameter")
        check_temperature(body.get("temperature"), bad)
        max_tokens = body.get("max_output_tokens")
        if max_tokens is not None and (not is_int(max_tokens) or max_tokens < 16):
            raise bad(
                f"Invalid 'max_output_tokens': integer below minimum value. Expected a value "
                f">= 16, but got {max_tokens} instead.",
                "max_output_tokens",
                "integer_below_min_value",
            )
        if "stream" in body and not isinstance(body["stream"], bool):
            raise bad("Invalid type for 'stream': expected a boolean.", "stream", "invalid_type")

        items: list[dict[str, Any]] = []
        previous = body.get("previous_response_id")
        if previous is not None:
            with env.lock:
                stored = env.responses.get(previous)
            if stored is None:
                raise bad(
                    f"Previous response with id '{previous}' not found.",
                    "previous_response_id",
                    "previous_response_not_found",
                )
            items.extend(stored)
        raw = body.get("input")
        if raw is None and previous is None and body.get("prompt") is None:
            raise bad("Missing required parameter: 'input'.", "input", "missing_required_parameter")
        if isinstance(raw, str):
            items.append({"role": "user", "content": raw})
        elif isinstance(raw, list):
            items.extend(raw)
        elif raw is not None:
            raise bad(
                "Invalid type for 'input': expected one of a string or array of input items.",
                "input",
                "invalid_type",
            )

        tools = self._tools(body.get("tools"), bad)
        tool_choice = self._tool_choice(body.get("tool_choice"), tools, bad)
        turns, segments, system_texts = self._items(items, bad, env, known_ids=previous is not None)
        instructions = body.get("instructions")
        system = "\n".join([instructions if isinstance(instructions, str) else "", *system_texts])
        segments.insert(0, dumps(body.get("tools") or []).decode() + system)

        reasoning = body.get("reasoning")
        reasoning = reasoning if isinstance(reasoning, dict) else {}
        thinking = ("reasoning" in body or bool(REASONING_MODEL.match(model))) and reasoning.get(
            "effort"
        ) != "none"
        include = body.get("include") or []
        schema: dict[str, Any] | None = None
        json_mode = False
        fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = json_schema_format(fmt, "text.format", "text.format.schema", bad)
        elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
            json_mode = True
        prompt = Prompt(
            model=model,
            turns=turns,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            parallel=body.get("parallel_tool_calls", True) is not False,
            thinking=thinking,
            max_tokens=max_tokens,
            output_schema=schema,
            json_mode=json_mode,
            segments=segments,
        )
        opts = {
            "summary": reasoning.get("summary") in ("auto", "concise", "detailed"),
            "encrypted": isinstance(include, list) and "reasoning.encrypted_content" in include,
            "obfuscation": (body.get("stream_options") or {}).get("include_obfuscation", True)
            is not False,
        }
        return prompt, items, opts

    @staticmethod
    def _tools(raw: Any, bad: Any) -> list[ToolSpec]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise bad("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
        tools: list[ToolSpec] = []
        for i, tool in enumerate(raw):
            if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
                raise bad(
                    f"Missing required parameter: 'tools[{i}].type'.",
                    f"tools[{i}].type",
                    "missing_required_parameter",
                )
            if tool["type"] != "function":
                continue  # web_search, file_search, mcp, ...: accepted, never called
            name = tool.get("name")
            if not isinstance(name, str):
                raise bad(
                    f"Missing required parameter: 'tools[{i}].name'.",
                    f"tools[{i}].name",
                    "missing_required_parameter",
                )
            parameters = tool.get("parameters")
            if parameters is not None and not isinstance(parameters, dict):
                raise bad(
                    f"Invalid type for 'tools[{i}].parameters': expected an object.",
                    f"tools[{i}].parameters",
                    "invalid_type",
                )
            if tool.get("strict") is True and parameters is not None:
                problem = strict_schema_problem(parameters)
                if problem:
                    raise bad(
                        f"Invalid schema for function '{name}': {problem}",
                        f"tools[{i}].parameters",
                        "invalid_function_parameters",
                    )
            description = tool.get("description")
            tools.append(
                ToolSpec(
                    name,
                    description if isinstance(description, str) else "",
                    parameters or {"type": "object", "properties": {}},
                )
            )
        return tools

    @staticmethod
    def _tool_choice(raw: Any, tools: list[ToolSpec], bad: Any) -> str:
        if raw is None or raw == "auto":
            return "auto"
        if raw in ("none", "required"):
            return str(raw)
        if isinstance(raw, dict) and raw.get("type") == "function":
            name = raw.get("name")
            if name not in {t.name for t in tools}:
                raise bad(f"Tool choice '{name}' not found in 'tools' parameter.", "tool_choice")
            return f"tool:{name}"
        if isinstance(raw, dict):
            return "auto"  # hosted tools, allowed_tools
        raise bad("Invalid value for 'tool_choice'.", "tool_choice", "invalid_value")

    @staticmethod
    def _items(
        items: list[Any], bad: Any, env: Env, *, known_ids: bool
    ) -> tuple[list[Turn], list[str], list[str]]:
        turns: list[Turn] = []
        segments: list[str] = []
        system: list[str] = []
        calls: dict[str, str] = {}
        answered: set[str] = set()
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise bad(
                    f"Invalid type for 'input[{i}]': expected an object.",
                    f"input[{i}]",
                    "invalid_type",
                )
            segments.append(dumps(item).decode())
            kind = item.get("type", "message")
            if kind == "custom_tool_call":  # a freeform call: its input, for arguments
                kind, item = "function_call", {**item, "arguments": item.get("input")}
            elif kind == "custom_tool_call_output":
                kind = "function_call_output"
            if kind == "message":
                role = item.get("role")
                if role not in ("user", "assistant", "system", "developer"):
                    raise bad(
                        f"Invalid value: '{role}'. Supported values are: 'assistant', "
                        "'system', 'developer', and 'user'.",
                        f"input[{i}].role",
                        "invalid_value",
                    )
                if "content" not in item:
                    raise bad(
                        f"Missing required parameter: 'input[{i}].content'.",
                        f"input[{i}].content",
                        "missing_required_parameter",
                    )
                text = text_of(item["content"])
                if role in ("system", "developer"):
                    system.append(text)
                    continue
                if role == "assistant" and turns and turns[-1].role == "assistant":
                    turns[-1].text = (turns[-1].text + "\n" + text).strip()
                    continue
                turns.append(Turn(role="user" if role == "user" else "assistant", text=text))
            elif kind == "function_call":
                call_id, name = item.get("call_id"), item.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise bad(
                        f"Missing required parameter: 'input[{i}].call_id'.",
                        f"input[{i}].call_id",
                        "missing_required_parameter",
                    )
                if not isinstance(item.get("arguments"), str):
                    raise bad(
                        f"Invalid type for 'input[{i}].arguments': expected a string.",
                        f"input[{i}].arguments",
                        "invalid_type",
                    )
                calls[call_id] = name
                call = CallIn(call_id, name, item["arguments"])
                if turns and turns[-1].role == "assistant":
                    turns[-1].calls.append(call)
                else:
                    turns.append(Turn(role="assistant", calls=[call]))
            elif kind == "function_call_output":
                call_id = item.get("call_id")
                if not isinstance(call_id, str):
                    raise bad(
                        f"Missing required parameter: 'input[{i}].call_id'.",
                        f"input[{i}].call_id",
                        "missing_required_parameter",
                    )
                if call_id not in calls:
                    raise bad(
                        f"No tool call found for function call output with call_id {call_id}.",
                        "input",
                    )
                answered.add(call_id)
                result = ResultIn(call_id, text_of(item.get("output")), calls[call_id])
                if turns and turns[-1].role == "user" and turns[-1].results:
                    turns[-1].results.append(result)
                else:
                    turns.append(Turn(role="user", results=[result]))
            elif kind == "reasoning":
                if not isinstance(item.get("id"), str):
                    raise bad(
                        f"Missing required parameter: 'input[{i}].id'.",
                        f"input[{i}].id",
                        "missing_required_parameter",
                    )
                content = item.get("encrypted_content")
                if isinstance(content, str):
                    if env.strict_signatures and not decrypts(content):
                        raise bad(
                            f"The encrypted content for item {item.get('id')} could not be "
                            "verified.",
                            None,
                            "invalid_encrypted_content",
                        )
                elif not known_ids and env.strict_signatures and not _stored(env, item.get("id")):
                    raise bad(
                        f"Item with id '{item.get('id')}' not found. Items are not persisted "
                        "when `store` is set to false. Try again with `store` set to true, "
                        "or remove this item from your input.",
                        "input",
                    )
            # item_reference, hosted tool calls: accepted as context
        missing = [c for c in calls if c not in answered]
        if missing:
            raise bad(f"No tool output found for function call {missing[0]}.", "input")
        return turns, segments, system

    # --- the response ---------------------------------------------------------------------

    @staticmethod
    def _response(
        body: dict[str, Any], reply: Reply, ids: Ids, opts: dict[str, Any]
    ) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if reply.thinking:
            reasoning: dict[str, Any] = {
                "id": "rs_" + ids.token(48, "hex"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reply.thinking}]
                if opts["summary"]
                else [],
            }
            if opts["encrypted"]:
                reasoning["encrypted_content"] = encrypt(reply.thinking)
            output.append(reasoning)
        if reply.text:
            output.append(
                {
                    "id": "msg_" + ids.token(48, "hex"),
                    "type": "message",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "annotations": [],
                            "logprobs": [],
                            "text": reply.text,
                        }
                    ],
                    "role": "assistant",
                }
            )
        for call in reply.calls:
            output.append(
                {
                    "id": "fc_" + ids.token(48, "hex"),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": call.arguments,
                    "call_id": "call_" + ids.token(24),
                    "name": call.name,
                }
            )
        usage = reply.usage
        reasoning_opts: dict[str, Any] = (
            body["reasoning"] if isinstance(body.get("reasoning"), dict) else {}
        )
        incomplete = reply.stop == "max_tokens"
        return {
            "id": "resp_" + ids.token(48, "hex"),
            "object": "response",
            "created_at": now_unix(),
            "status": "incomplete" if incomplete else "completed",
            "background": False,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body["model"],
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {
                "effort": reasoning_opts.get("effort"),
                "summary": reasoning_opts.get("summary"),
            },
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "usage": {
                "input_tokens": usage.input_tokens,
                "input_tokens_details": {"cached_tokens": usage.cache_read},
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": usage.thinking_tokens},
                "total_tokens": usage.input_tokens + usage.output_tokens,
            },
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    @staticmethod
    def _events(response: dict[str, Any], ids: Ids) -> list[Frame]:
        frames: list[Frame] = []

        def emit(kind: str, data: dict[str, Any], obfuscate: bool = False) -> None:
            event = {"type": kind, "sequence_number": len(frames), **data}
            if obfuscate:
                event["obfuscation"] = ids.token(3 + len(frames) % 11)
            frames.append(sse(event, kind))

        pending = {
            **response,
            "status": "in_progress",
            "output": [],
            "usage": None,
            "incomplete_details": None,
        }
        emit("response.created", {"response": pending})
        emit("response.in_progress", {"response": pending})
        for index, item in enumerate(response["output"]):
            where = {"item_id": item["id"], "output_index": index}
            if item["type"] == "reasoning":
                emit(
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "summary": []}},
                )
                for s_index, part in enumerate(item["summary"]):
                    at = {**where, "summary_index": s_index}
                    emit(
                        "response.reasoning_summary_part.added",
                        {**at, "part": {"type": "summary_text", "text": ""}},
                    )
                    for piece in split_text(part["text"]):
                        emit("response.reasoning_summary_text.delta", {**at, "delta": piece}, True)
                    emit("response.reasoning_summary_text.done", {**at, "text": part["text"]})
                    emit("response.reasoning_summary_part.done", {**at, "part": part})
            elif item["type"] == "message":
                emit(
                    "response.output_item.added",
                    {
                        "output_index": index,
                        "item": {**item, "status": "in_progress", "content": []},
                    },
                )
                part = item["content"][0]
                at = {**where, "content_index": 0}
                emit("response.content_part.added", {**at, "part": {**part, "text": ""}})
                for piece in split_text(part["text"]):
                    emit("response.output_text.delta", {**at, "delta": piece, "logprobs": []}, True)
                emit("response.output_text.done", {**at, "text": part["text"], "logprobs": []})
                emit("response.content_part.done", {**at, "part": part})
            else:
                emit(
                    "response.output_item.added",
                    {
                        "output_index": index,
                        "item": {**item, "status": "in_progress", "arguments": ""},
                    },
                )
                for piece in split_json(item["arguments"]):
                    emit("response.function_call_arguments.delta", {**where, "delta": piece}, True)
                emit(
                    "response.function_call_arguments.done",
                    {**where, "arguments": item["arguments"]},
                )
            emit("response.output_item.done", {"output_index": index, "item": item})
        final = (
            "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        )
        emit(final, {"response": response})
        return frames

    @staticmethod
    def _failed(response: dict[str, Any], kind: str, sequence: int) -> Frame:
        code, message = {
            "rate_limit": ("rate_limit_exceeded", "Rate limit reached. Please try again later."),
            "overloaded": ("server_error", "The server is overloaded or not ready yet."),
        }.get(
            kind,
            (
                "server_error",
                "An error occurred while processing your request. You can "
                "retry your request, or contact us through our help center.",
            ),
        )
        failed = {
            **response,
            "status": "failed",
            "output": [],
            "usage": None,
            "error": {"code": code, "message": message},
        }
        return sse(
            {"type": "response.failed", "sequence_number": sequence, "response": failed},
            "response.failed",
        )


def _stored(env: Env, item_id: Any) -> bool:
    if not isinstance(item_id, str):
        return False
    with env.lock:
        stored = list(env.responses.values())
    return any(item.get("id") == item_id for items in stored for item in items)
