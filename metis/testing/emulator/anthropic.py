"""Anthropic Messages API: ``POST /v1/messages`` (and ``/v1/messages/count_tokens``).

Auth: ``x-api-key`` (401 ``authentication_error`` without it) and ``anthropic-version``
(400 without it). Validated like the real API: unknown top-level fields, ``model``,
``max_tokens``, ``messages`` (roles, block types, every ``tool_use`` answered by a
``tool_result`` in the next message and every ``tool_result`` answering one), tools (names,
``input_schema``, unique), ``tool_choice``, ``thinking`` (budget >= 1024 and < max_tokens, no
temperature other than 1, no forced tool use) and signed thinking blocks (only signatures this
emulator issued are accepted back, as only Anthropic's are by Anthropic).

Streams are ``event:`` + ``data:`` SSE with a ``ping`` after the first block starts, some
``data:`` lines padded with trailing spaces (as recorded), tool input in ``input_json_delta``
fragments after an empty one, and usage in ``message_start`` and ``message_delta``.
"""

from __future__ import annotations

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
    dumps,
    is_int,
    is_number,
    parse_json_object,
    signature,
    split_json,
    split_text,
    sse,
    text_of,
    tool_name_ok,
    verify,
)
from metis.testing.emulator.responder import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn

ORGANIZATION = "6c5b7a38-2f4e-4bd1-9a54-000000e30a70"
VERSIONS = frozenset({"2023-06-01", "2023-01-01"})
TOP_LEVEL = frozenset(
    [
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "tools",
        "tool_choice",
        "thinking",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "output_config",
        "output_format",
        "inference_geo",
    ]
)
BLOCKS = frozenset(
    [
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "tool_search_tool_result",
        "tool_reference",
    ]
)
ADAPTIVE_ONLY = re.compile(r"^claude-opus-4-7")
SIGNATURE_KIND = "anthropic-thinking"
ERRORS = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed your organization's rate limit of 50 requests per minute. "
        "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "server_error": (500, "api_error", "Internal server error"),
    "auth": (401, "authentication_error", "invalid x-api-key"),
}


class Anthropic(Provider):
    name = "anthropic"

    def route(self, method: str, path: str) -> str | None:
        if method == "POST" and path == "/v1/messages":
            return "messages"
        if method == "POST" and path == "/v1/messages/count_tokens":
            return "count_tokens"
        return None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if path in ("/v1/messages", "/v1/messages/count_tokens") else []

    # --- errors ---------------------------------------------------------------------------

    def error(
        self, status: int, kind: str, message: str, request: HttpRequest, **headers: str
    ) -> JsonReply:
        request_id = _request_id(request)
        body = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": request_id,
        }
        base = {"request-id": request_id, "anthropic-organization-id": ORGANIZATION}
        if status in (408, 409, 429) or status >= 500:
            base["x-should-retry"] = "true"
        return JsonReply(status, body, {**base, **headers})

    def invalid(self, message: str, request: HttpRequest) -> JsonReply:
        return self.error(400, "invalid_request_error", message, request)

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        key = request.header("x-api-key")
        if not key:
            return self.error(401, "authentication_error", "x-api-key header is required", request)
        if keys is not None and key not in keys:
            return self.error(401, "authentication_error", "invalid x-api-key", request)
        version = request.header("anthropic-version")
        if not version:
            return self.invalid("anthropic-version: header is required", request)
        if version not in VERSIONS:
            return self.invalid(f"anthropic-version: invalid version {version!r}", request)
        return None

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "context_overflow":
            return self.invalid("prompt is too long: 208367 tokens > 200000 maximum", request)
        status, error_type, message = ERRORS[kind]
        extra: dict[str, str] = {}
        if kind == "rate_limit":
            extra = {
                "retry-after": _seconds(retry_after),
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
            }
        return self.error(status, error_type, message, request, **extra)

    # --- requests -------------------------------------------------------------------------

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        body = parse_json_object(request, lambda m: self.invalid(m, request))
        if endpoint == "count_tokens":
            body.setdefault("max_tokens", 1)
            prompt = self.prompt(body, request, env, count_only=True)
            total = sum(len(s) for s in prompt.segments)
            return JsonReply(
                200, {"input_tokens": max(1, (total + 3) // 4)}, self._headers(request)
            )
        prompt = self.prompt(body, request, env)
        reply = env.responder.reply(prompt)
        limit = env.context_tokens.get(self.name, 200_000)
        if reply.usage.input_tokens > limit:
            raise ApiError(
                self.invalid(
                    f"prompt is too long: {reply.usage.input_tokens} tokens > {limit} maximum",
                    request,
                )
            )
        if prompt.breakpoints:
            read, write = env.responder.cache.explicit(
                self.name, prompt.segments, prompt.breakpoints
            )
            reply.usage.cache_read, reply.usage.cache_write = read, write
        ids = Ids(request.digest)
        message = self._message(body["model"], reply, ids)
        if body.get("stream") is True:
            return StreamReply(
                self._events(message, reply),
                {
                    **self._headers(request),
                    "content-type": "text/event-stream; charset=utf-8",
                    "cache-control": "no-cache",
                },
                lambda kind: [self._stream_error(kind, request)],
            )
        return JsonReply(
            200, message, {**self._headers(request), "content-type": "application/json"}
        )

    def _headers(self, request: HttpRequest) -> dict[str, str]:
        return {"request-id": _request_id(request), "anthropic-organization-id": ORGANIZATION}

    def _stream_error(self, kind: str, request: HttpRequest) -> Frame:
        _, error_type, message = ERRORS.get(kind, ERRORS["overloaded"])
        payload = {
            "type": "error",
            "error": {"type": error_type, "message": message},
            "request_id": _request_id(request),
        }
        return sse(payload, "error")

    def prompt(
        self, body: dict[str, Any], request: HttpRequest, env: Env, *, count_only: bool = False
    ) -> Prompt:
        def bad(message: str) -> ApiError:
            return ApiError(self.invalid(message, request))

        for key in body:
            if key not in TOP_LEVEL:
                raise bad(f"{key}: Extra inputs are not permitted")
        refused = files.anthropic(body)
        if refused is not None:
            kind = "request_too_large" if refused.status == 413 else "invalid_request_error"
            raise ApiError(self.error(refused.status, kind, refused.message, request))
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise bad("model: Field required")
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            raise bad("max_tokens: Field required")
        if not is_int(max_tokens) or max_tokens < 1:
            raise bad("max_tokens: Input should be greater than or equal to 1")
        if "stream" in body and not isinstance(body["stream"], bool):
            raise bad("stream: Input should be a valid boolean")
        temperature = body.get("temperature")
        if temperature is not None and (not is_number(temperature) or not 0 <= temperature <= 1):
            raise bad("temperature: Input should be less than or equal to 1")
        if ADAPTIVE_ONLY.match(model):  # sampling and manual thinking removed (Opus 4.7)
            for name in ("temperature", "top_p", "top_k"):
                if name in body:
                    raise bad(f"`{name}` is deprecated for this model.")
            thinking = body.get("thinking")
            if isinstance(thinking, dict) and thinking.get("type") == "enabled":
                raise bad(
                    "thinking.type: 'enabled' is not supported for this model; use 'adaptive'"
                )

        segments = [""]
        breakpoints: set[int] = set()
        system = body.get("system")
        system_text = ""
        if system is not None:
            if isinstance(system, str):
                system_text = system
            elif isinstance(system, list):
                for j, block in enumerate(system):
                    if not isinstance(block, dict) or block.get("type") != "text":
                        raise bad(f"system.{j}.type: Input should be 'text'")
                    if not isinstance(block.get("text"), str):
                        raise bad(f"system.{j}.text: Field required")
                    if "cache_control" in block:
                        breakpoints.add(0)
                system_text = text_of(system)
            else:
                raise bad("system: Input should be a valid string or a list of text blocks")

        tools = self._tools(body.get("tools"), bad, breakpoints)
        tool_choice, parallel = self._tool_choice(body.get("tool_choice"), tools, body, bad)
        thinking = self._thinking(body, max_tokens, tool_choice, bad)
        turns = self._messages(body.get("messages"), bad, env, segments, breakpoints)
        segments[0] = dumps(body.get("tools") or []).decode() + system_text

        fmt = body.get("output_format") or (body.get("output_config") or {}).get("format")
        schema = (
            fmt.get("schema")
            if isinstance(fmt, dict) and fmt.get("type") == "json_schema"
            else None
        )
        return Prompt(
            model=model,
            turns=turns,
            system=system_text,
            tools=tools,
            tool_choice=tool_choice,
            parallel=parallel,
            thinking=thinking,
            max_tokens=max_tokens,
            output_schema=schema if isinstance(schema, dict) else None,
            segments=segments,
            breakpoints=sorted(breakpoints) or None,
        )

    @staticmethod
    def _tools(raw: Any, bad: Any, breakpoints: set[int]) -> list[ToolSpec]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise bad("tools: Input should be a valid list")
        tools: list[ToolSpec] = []
        names: set[str] = set()
        for i, tool in enumerate(raw):
            if not isinstance(tool, dict):
                raise bad(f"tools.{i}: Input should be a valid dictionary")
            if "cache_control" in tool:
                breakpoints.add(0)
            name = tool.get("name")
            kind = tool.get("type", "custom")
            if kind != "custom":
                if not isinstance(name, str):  # a server tool (web_search_..., bash_...)
                    raise bad(f"tools.{i}.name: Field required")
                names.add(name)
                continue
            if not tool_name_ok(name, 128):
                raise bad(
                    f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
                )
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise bad(f"tools.{i}.custom.input_schema: Field required")
            if schema.get("type") != "object":
                raise bad(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
            assert isinstance(name, str)
            if name in names:
                raise bad("tools: Tool names must be unique.")
            names.add(name)
            description = tool.get("description")
            tools.append(
                ToolSpec(name, description if isinstance(description, str) else "", schema)
            )
        return tools

    @staticmethod
    def _tool_choice(
        raw: Any, tools: list[ToolSpec], body: dict[str, Any], bad: Any
    ) -> tuple[str, bool]:
        if raw is None:
            return "auto", True
        if not body.get("tools"):
            raise bad("tool_choice may only be specified while providing tools.")
        if not isinstance(raw, dict) or raw.get("type") not in ("auto", "any", "tool", "none"):
            raise bad(
                "tool_choice: Input tag found using 'type' does not match any of the expected "
                "tags: 'auto', 'any', 'tool', 'none'"
            )
        parallel = not raw.get("disable_parallel_tool_use", False)
        kind = raw["type"]
        if kind == "none" and "disable_parallel_tool_use" in raw:
            raise bad("tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted")
        if kind == "tool":
            name = raw.get("name")
            if not isinstance(name, str):
                raise bad("tool_choice.tool.name: Field required")
            if name not in {t.name for t in tools}:
                raise bad(f"Tool '{name}' not found in tools.")
            return f"tool:{name}", parallel
        return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel

    @staticmethod
    def _thinking(body: dict[str, Any], max_tokens: int, tool_choice: str, bad: Any) -> bool:
        raw = body.get("thinking")
        if raw is None:
            return False
        if not isinstance(raw, dict) or raw.get("type") not in ("enabled", "disabled", "adaptive"):
            raise bad(
                "thinking: Input tag found using 'type' does not match any of the expected "
                "tags: 'enabled', 'disabled', 'adaptive'"
            )
        if raw["type"] == "disabled":
            return False
        if raw["type"] == "enabled":
            budget = raw.get("budget_tokens")
            if budget is None:
                raise bad("thinking.enabled.budget_tokens: Field required")
            if not is_int(budget) or budget < 1024:
                raise bad(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                )
            if max_tokens <= budget:
                raise bad(
                    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult "
                    "our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-"
                    "thinking#max-tokens-and-context-window-size"
                )
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            raise bad(
                "`temperature` may only be set to 1 when thinking is enabled or in adaptive "
                "mode. Please consult our documentation at https://docs.claude.com/en/docs/"
                "build-with-claude/extended-thinking#feature-compatibility"
            )
        if raw["type"] == "enabled" and (
            tool_choice == "required" or tool_choice.startswith("tool:")
        ):
            raise bad("Thinking may not be enabled when tool_choice forces tool use.")
        if "top_k" in body:
            raise bad("`top_k` may not be set when thinking is enabled.")
        _check_turn_opens_with_thinking(body.get("messages"), bad)
        return True

    @staticmethod
    def _messages(
        raw: Any, bad: Any, env: Env, segments: list[str], breakpoints: set[int]
    ) -> list[Turn]:
        if raw is None:
            raise bad("messages: Field required")
        if not isinstance(raw, list):
            raise bad("messages: Input should be a valid list")
        if not raw:
            raise bad("messages: at least one message is required")
        turns: list[Turn] = []
        pending: list[str] = []  # tool_use ids the previous assistant message left open
        pending_at = -1
        for i, message in enumerate(raw):
            if not isinstance(message, dict):
                raise bad(f"messages.{i}: Input should be a valid dictionary")
            role = message.get("role")
            if role not in ("user", "assistant"):
                raise bad(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            content = message.get("content")
            if content is None:
                raise bad(f"messages.{i}.content: Field required")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                raise bad(f"messages.{i}.content: Input should be a valid string or list")
            turn = Turn(role=role)
            texts: list[str] = []
            for j, block in enumerate(blocks):
                where = f"messages.{i}.content.{j}"
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise bad(f"{where}: Input should be a valid dictionary with a 'type'")
                kind = block["type"]
                if kind not in BLOCKS:
                    raise bad(
                        f"{where}: Input tag '{kind}' found using 'type' does not match any "
                        "of the expected tags"
                    )
                if "cache_control" in block:
                    breakpoints.add(i + 1)
                if kind == "text":
                    if not isinstance(block.get("text"), str):
                        raise bad(f"{where}.text.text: Field required")
                    texts.append(block["text"])
                elif kind == "tool_use":
                    if role != "assistant":
                        raise bad(f"{where}: `tool_use` blocks can only be in `assistant` messages")
                    if not isinstance(block.get("id"), str) or not isinstance(
                        block.get("name"), str
                    ):
                        raise bad(f"{where}.tool_use: `id` and `name` are required")
                    if not isinstance(block.get("input"), dict):
                        raise bad(f"{where}.tool_use.input: Input should be a valid dictionary")
                    turn.calls.append(CallIn(block["id"], block["name"], block["input"]))
                elif kind == "tool_result":
                    if role != "user":
                        raise bad(f"{where}: `tool_result` blocks can only be in `user` messages")
                    use_id = block.get("tool_use_id")
                    if not isinstance(use_id, str):
                        raise bad(f"{where}.tool_result.tool_use_id: Field required")
                    turn.results.append(
                        ResultIn(
                            use_id, text_of(block.get("content")), None, bool(block.get("is_error"))
                        )
                    )
                elif kind == "thinking":
                    if role != "assistant":
                        raise bad(f"{where}: `thinking` blocks can only be in `assistant` messages")
                    thought, sig = block.get("thinking"), block.get("signature")
                    if not isinstance(thought, str) or not isinstance(sig, str):
                        raise bad(f"{where}.thinking: `thinking` and `signature` are required")
                    if env.strict_signatures and not verify(SIGNATURE_KIND, thought, sig):
                        raise bad(f"{where}: Invalid `signature` in `thinking` block")
                elif kind == "redacted_thinking" and role != "assistant":
                    raise bad(
                        f"{where}: `redacted_thinking` blocks can only be in `assistant` messages"
                    )
            turn.text = "\n".join(texts)
            # every tool_use must be answered in the very next message, and only those
            if pending:
                answered = {r.call_id for r in turn.results}
                missing = [p for p in pending if p not in answered]
                if role != "user" or missing:
                    raise bad(
                        f"messages.{pending_at}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {', '.join(missing or pending)}. Each "
                        "`tool_use` block must have a corresponding `tool_result` block in the "
                        "next message."
                    )
            if turn.results:
                known = set(pending)
                stray = [r.call_id for r in turn.results if r.call_id not in known]
                if stray:
                    first = next(
                        j
                        for j, b in enumerate(blocks)
                        if b.get("type") == "tool_result" and b.get("tool_use_id") in stray
                    )
                    raise bad(
                        f"messages.{i}.content.{first}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {stray[0]}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
            pending = [c.id for c in turn.calls]
            pending_at = i
            turns.append(turn)
            segments.append(dumps(message).decode())
        if pending and turns[-1].role == "assistant":
            # a trailing assistant message with open tool calls is a prefill the API refuses
            raise bad(
                f"messages.{pending_at}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(pending)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        return turns

    # --- replies --------------------------------------------------------------------------

    @staticmethod
    def _message(model: str, reply: Reply, ids: Ids) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append(
                {
                    "type": "thinking",
                    "thinking": reply.thinking,
                    "signature": signature(SIGNATURE_KIND, reply.thinking),
                }
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": "toolu_01" + ids.token(22, "b58"),
                    "name": call.name,
                    "input": call.args,
                }
            )
        usage = reply.usage
        return {
            "id": "msg_01" + ids.token(22, "b58"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": reply.stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.uncached_input,
                "cache_creation_input_tokens": usage.cache_write,
                "cache_read_input_tokens": usage.cache_read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": usage.cache_write,
                    "ephemeral_1h_input_tokens": 0,
                },
                "output_tokens": usage.output_tokens,
                "service_tier": "standard",
            },
        }

    @staticmethod
    def _events(message: dict[str, Any], reply: Reply) -> list[Frame]:
        frames: list[Frame] = []

        def emit(event: str, data: dict[str, Any]) -> None:
            pad = (len(frames) * 7) % 13 if event != "ping" else 0
            frames.append(sse(data, event, pad=pad))

        usage = message["usage"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        emit("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(message["content"]):
            kind = block["type"]
            first: dict[str, Any]
            if kind == "thinking":
                first = {"type": "thinking", "thinking": "", "signature": ""}
            elif kind == "text":
                first = {"type": "text", "text": ""}
            else:
                first = {**block, "input": {}}
            emit(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": first},
            )
            if index == 0:
                frames.append(sse({"type": "ping"}, "ping"))

            def delta(d: dict[str, Any], i: int = index) -> None:
                emit("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

            if kind == "thinking":
                for piece in split_text(block["thinking"]):
                    delta({"type": "thinking_delta", "thinking": piece})
                delta({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "text":
                for piece in split_text(block["text"]):
                    delta({"type": "text_delta", "text": piece})
            else:
                delta({"type": "input_json_delta", "partial_json": ""})
                arguments = dumps(block["input"]).decode()
                for piece in split_json(arguments) if block["input"] else []:
                    delta({"type": "input_json_delta", "partial_json": piece})
            emit("content_block_stop", {"type": "content_block_stop", "index": index})
        emit(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop, "stop_sequence": None},
                "usage": {
                    "input_tokens": usage["input_tokens"],
                    "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                    "cache_read_input_tokens": usage["cache_read_input_tokens"],
                    "output_tokens": usage["output_tokens"],
                },
            },
        )
        emit("message_stop", {"type": "message_stop"})
        return frames


def _check_turn_opens_with_thinking(messages: Any, bad: Any) -> None:
    """With thinking on, the assistant turn still in progress (a tool loop: the request ends
    with tool results) must open with a thinking block."""
    if not isinstance(messages, list):
        return

    def results_only(message: Any) -> bool:
        content = message.get("content") if isinstance(message, dict) else None
        return (
            isinstance(content, list)
            and message.get("role") == "user"
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        )

    if not messages or not results_only(messages[-1]):
        return
    opening = None
    for i in range(len(messages) - 1, -1, -1):
        if not isinstance(messages[i], dict):
            return
        if messages[i].get("role") == "assistant":
            opening = i
        elif not results_only(messages[i]):
            break
    if opening is None:
        return
    content = messages[opening].get("content")
    kind = (
        content[0].get("type")
        if isinstance(content, list) and content and isinstance(content[0], dict)
        else "text"
    )
    if kind not in ("thinking", "redacted_thinking"):
        raise bad(
            f"messages.{opening}.content.0.type: Expected `thinking` or `redacted_thinking`, "
            f"but found `{kind}`. When `thinking` is enabled, a final `assistant` message must "
            "start with a thinking block (preceeding the lastmost set of `tool_use` and "
            "`tool_result` blocks). We recommend you include thinking blocks from previous "
            "turns. To avoid this requirement, disable `thinking`."
        )


def _request_id(request: HttpRequest) -> str:
    return "req_011C" + Ids(request.digest + request.number.to_bytes(8, "big")).token(20, "b58")


def _seconds(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"
