"""Ollama: ``POST /api/chat``, ``POST /api/show``, ``GET /api/tags``, ``GET /api/version``,
``GET /`` (no auth).

Validated like the real server: ``model`` required, message roles, tool calls' arguments as
objects; models of families that cannot use tools or think (``gemma*``, as recorded) refuse
``tools`` and ``think`` with Ollama's own 400s; a chat with no messages is a model load
(``done_reason: "load"``). ``stream`` defaults to true.

Streams are NDJSON (``application/x-ndjson``), one object per line and per chunk: ``thinking``
deltas first when ``think`` is on, ``content`` deltas, tool calls whole (arguments as objects,
with an id and an index) in one line, then the ``done: true`` line with ``done_reason`` and the
timings (``prompt_eval_count``, ``eval_count``, durations in ns). An error inside a stream is an
``{"error": "..."}`` line.
"""

from __future__ import annotations

import json
from typing import Any

from metis.testing.emulator._wire import (
    ApiError,
    Env,
    Frame,
    HttpRequest,
    Ids,
    JsonReply,
    Provider,
    StreamReply,
    ndjson,
    parse_json_object,
    rfc3339_nanos,
    split_text,
    text_of,
)
from metis.testing.emulator.responder import CallIn, Prompt, Reply, ResultIn, ToolSpec, Turn

VERSION = "0.12.6"
NO_TOOLS = ("gemma", "llava", "phi3")
NO_THINKING = ("gemma", "llama", "llava", "phi3", "mistral")
MODELS = [
    ("llama3.2:latest", "llama", "3.2B", "Q4_K_M", 2019393189),
    ("qwen3:latest", "qwen3", "8.2B", "Q4_K_M", 5225388164),
    ("gpt-oss:20b", "gptoss", "20.9B", "MXFP4", 13780173734),
    ("gemma3:1b", "gemma3", "999.89M", "Q4_K_M", 815319791),
]


def ollama_error(status: int, message: str) -> JsonReply:
    return JsonReply(
        status, {"error": message}, {"content-type": "application/json; charset=utf-8"}
    )


class Ollama(Provider):
    name = "ollama"

    def route(self, method: str, path: str) -> str | None:
        routes = {
            ("POST", "/api/chat"): "chat",
            ("GET", "/api/tags"): "tags",
            ("GET", "/api/version"): "version",
            ("POST", "/api/show"): "show",
            ("GET", "/"): "root",
            ("HEAD", "/"): "root",
        }
        return routes.get((method, path))

    def allowed_methods(self, path: str) -> list[str]:
        return {
            "/api/chat": ["POST"],
            "/api/tags": ["GET"],
            "/api/version": ["GET"],
            "/api/show": ["POST"],
            "/": ["GET", "HEAD"],
        }.get(path, [])

    def authenticate(
        self, endpoint: str, request: HttpRequest, keys: frozenset[str] | None
    ) -> JsonReply | None:
        return None  # a local Ollama has no auth

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        if kind == "rate_limit":
            reply = ollama_error(429, "too many requests, please try again later")
            reply.headers["retry-after"] = f"{retry_after:g}"
            return reply
        if kind == "overloaded":
            return ollama_error(
                503, "server busy, please try again.  maximum pending requests exceeded"
            )
        if kind == "server_error":
            return ollama_error(500, "llama runner process has terminated: exit status 2")
        if kind == "auth":
            return ollama_error(401, "unauthorized")
        return ollama_error(400, "the input length exceeds the context length")

    def handle(self, endpoint: str, request: HttpRequest, env: Env) -> JsonReply | StreamReply:
        if endpoint == "root":
            return JsonReply(
                200, raw=b"Ollama is running", headers={"content-type": "text/plain; charset=utf-8"}
            )
        if endpoint == "version":
            return JsonReply(
                200, {"version": VERSION}, {"content-type": "application/json; charset=utf-8"}
            )
        if endpoint == "tags":
            return JsonReply(
                200,
                {"models": [_tag(*m) for m in MODELS]},
                {"content-type": "application/json; charset=utf-8"},
            )
        body = parse_json_object(request, lambda m: ollama_error(400, m))
        if endpoint == "show":
            return self._show(body)
        prompt, think = self.prompt(body)
        model = body["model"]
        stream = body.get("stream", True) is not False
        if not prompt.turns:
            done = {
                "model": model,
                "created_at": rfc3339_nanos(),
                "message": {"role": "assistant", "content": ""},
                "done_reason": "load",
                "done": True,
            }
            if stream:
                return StreamReply(
                    [ndjson(done)], {"content-type": "application/x-ndjson"}, lambda kind: []
                )
            return JsonReply(200, done, {"content-type": "application/json; charset=utf-8"})
        reply = env.responder.reply(prompt)
        limit = env.context_tokens.get(self.name)
        if limit is not None and reply.usage.input_tokens > limit:
            raise ApiError(ollama_error(400, "the input length exceeds the context length"))
        ids = Ids(request.digest)
        calls = [
            {
                "id": "call_" + ids.token(8, "lower"),
                "function": {"index": i, "name": c.name, "arguments": c.args},
            }
            for i, c in enumerate(reply.calls)
        ]
        final = _timings(reply)
        if stream:
            return StreamReply(
                self._lines(model, reply, calls, think, final),
                {"content-type": "application/x-ndjson"},
                lambda kind: [ndjson({"error": _stream_error(kind)})],
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if think and reply.thinking:
            message["thinking"] = reply.thinking
        if calls:
            message["tool_calls"] = calls
        whole = {
            "model": model,
            "created_at": rfc3339_nanos(),
            "message": message,
            "done": True,
            **final,
        }
        return JsonReply(200, whole, {"content-type": "application/json; charset=utf-8"})

    def prompt(self, body: dict[str, Any]) -> tuple[Prompt, bool]:
        def bad(message: str, status: int = 400) -> ApiError:
            return ApiError(ollama_error(status, message))

        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise bad("model is required")
        family = model.split("/")[-1].lower()
        raw_tools = body.get("tools")
        if raw_tools and family.startswith(NO_TOOLS):
            raise bad(f"registry.ollama.ai/library/{model} does not support tools")
        think = body.get("think")
        thinking = think is True or think in ("low", "medium", "high")
        if thinking and family.startswith(NO_THINKING):
            raise bad(f'"{model}" does not support thinking')
        tools: list[ToolSpec] = []
        for tool in raw_tools or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise bad("invalid tool definition: function.name is required")
            description = function.get("description")
            parameters = function.get("parameters")
            tools.append(
                ToolSpec(
                    function["name"],
                    description if isinstance(description, str) else "",
                    parameters if isinstance(parameters, dict) else {},
                )
            )
        messages = body.get("messages") or []
        if not isinstance(messages, list):
            raise bad(
                "json: cannot unmarshal into Go struct field ChatRequest.messages of type "
                "[]api.Message"
            )
        turns: list[Turn] = []
        segments = [json.dumps(raw_tools or [])]
        system: list[str] = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise bad(
                    "json: cannot unmarshal into Go struct field ChatRequest.messages of type "
                    "api.Message"
                )
            role = message.get("role")
            if role not in ("system", "user", "assistant", "tool"):
                raise bad(f"invalid role: {role!r}")
            segments.append(json.dumps(message, ensure_ascii=False))
            content = message.get("content", "")
            if not isinstance(content, str):
                raise bad(
                    "json: cannot unmarshal array into Go struct field Message.messages.content "
                    "of type string"
                )
            if role == "system":
                system.append(content)
            elif role == "tool":
                result = ResultIn(
                    str(message.get("tool_call_id") or ""),
                    content,
                    message.get("tool_name") or message.get("name"),
                )
                if turns and turns[-1].role == "user" and turns[-1].results:
                    turns[-1].results.append(result)
                else:
                    turns.append(Turn(role="user", results=[result]))
            elif role == "assistant":
                turn = Turn(role="assistant", text=content)
                for j, call in enumerate(message.get("tool_calls") or []):
                    function = call.get("function") if isinstance(call, dict) else None
                    if not isinstance(function, dict):
                        raise bad(f"messages[{i}].tool_calls[{j}]: function is required")
                    arguments = function.get("arguments", {})
                    if not isinstance(arguments, dict):
                        raise bad(
                            "json: cannot unmarshal string into Go struct field "
                            "ToolCallFunction.messages.tool_calls.function.arguments of type "
                            "api.ToolCallFunctionArguments"
                        )
                    turn.calls.append(
                        CallIn(str(call.get("id") or j), str(function.get("name")), arguments)
                    )
                turns.append(turn)
            else:
                turns.append(Turn(role="user", text=text_of(content)))
        fmt = body.get("format")
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        num_predict = options.get("num_predict") if options else None
        prompt = Prompt(
            model=model,
            turns=turns,
            system="\n".join(system),
            tools=tools,
            thinking=thinking,
            max_tokens=num_predict if isinstance(num_predict, int) and num_predict > 0 else None,
            output_schema=fmt if isinstance(fmt, dict) else None,
            json_mode=fmt == "json",
            segments=segments,
        )
        return prompt, thinking

    @staticmethod
    def _show(body: dict[str, Any]) -> JsonReply:
        model = body.get("model", body.get("name"))
        if not isinstance(model, str) or not model:
            return ollama_error(400, "model is required")
        known = {m[0]: m for m in MODELS}
        name = model if ":" in model else model + ":latest"
        default = (name, name.split(":")[0], "7B", "Q4_K_M", 0)
        _, family, size, quant, _ = known.get(name, default)
        base = name.split("/")[-1].lower()
        capabilities = ["completion"]
        if not base.startswith(NO_TOOLS):
            capabilities.append("tools")
        if not base.startswith(NO_THINKING):
            capabilities.append("thinking")
        shown = {
            "license": "",
            "modelfile": f"FROM {name}\n",
            "parameters": "temperature 0.6\ntop_p 0.95",
            "template": "{{ .Prompt }}",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": family,
                "families": [family],
                "parameter_size": size,
                "quantization_level": quant,
            },
            "model_info": {
                "general.architecture": family,
                "general.parameter_count": 8_000_000_000,
                f"{family}.context_length": 40960,
            },
            "capabilities": capabilities,
            "modified_at": "2025-08-20T13:40:00.000000000Z",
        }
        return JsonReply(200, shown, {"content-type": "application/json; charset=utf-8"})

    @staticmethod
    def _lines(
        model: str, reply: Reply, calls: list[dict[str, Any]], think: bool, final: dict[str, Any]
    ) -> list[Frame]:
        lines: list[Frame] = []

        def line(message: dict[str, Any], done: bool = False, **extra: Any) -> None:
            lines.append(
                ndjson(
                    {
                        "model": model,
                        "created_at": rfc3339_nanos(),
                        "message": {"role": "assistant", **message},
                        "done": done,
                        **extra,
                    }
                )
            )

        if think:
            for piece in split_text(reply.thinking):
                line({"content": "", "thinking": piece})
        for piece in split_text(reply.text):
            line({"content": piece})
        if calls:
            line({"content": "", "tool_calls": calls})
        line({"content": ""}, True, **final)
        return lines


def _timings(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "done_reason": "length" if reply.stop == "max_tokens" else "stop",
        "total_duration": 1_000_000 + 5_000_000 * usage.output_tokens,
        "load_duration": 1_000_000,
        "prompt_eval_count": usage.input_tokens,
        "prompt_eval_duration": 100_000 * usage.input_tokens,
        "eval_count": usage.output_tokens,
        "eval_duration": 5_000_000 * usage.output_tokens,
    }


def _stream_error(kind: str) -> str:
    return {
        "rate_limit": "too many requests, please try again later",
        "overloaded": "server busy, please try again.  maximum pending requests exceeded",
    }.get(kind, "an error was encountered while running the model: unexpected EOF")


def _tag(name: str, family: str, size: str, quant: str, nbytes: int) -> dict[str, Any]:
    digest = Ids(name.encode()).token(64, "hex")
    return {
        "name": name,
        "model": name,
        "modified_at": "2025-08-20T13:40:00.000000000Z",
        "size": nbytes,
        "digest": digest,
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": family,
            "families": [family],
            "parameter_size": size,
            "quantization_level": quant,
        },
    }
