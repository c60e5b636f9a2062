"""The Ollama native chat codec (``POST /api/chat``, streamed as NDJSON).

``encode`` builds the request: the system prompt as the first message, tool results as
``role: tool`` messages naming the tool (``tool_name``) and the call (``tool_call_id``, which
older servers ignore), ``is_error`` as an ``"Error: "`` prefix, tool-call arguments as JSON
objects, images as bare base64 (URL images are dropped: Ollama fetches nothing), generation
settings under ``options``. ``options.num_ctx`` is the context the adapter declares
(``max_context_tokens``), so the window capability_check enforces is the one Ollama allocates
instead of its silently truncating default. Knobs from ``AdapterConfig.options``: ``num_ctx``
(a number, or null to leave Ollama's default), ``keep_alive``, ``think`` (what to send when the
request asks for thinking: true, a level ``low``/``medium``/``high`` for gpt-oss, or ``budget``
to derive the level from ``budget_tokens``) and ``model_options`` (more Ollama options).

Reasoning goes back as the assistant message's ``thinking`` only to the provider and model
that produced it: a local model's reasoning has no signature to check, and its chat template
expects it (gpt-oss, qwen3 in tool loops). So the stack has no ``thinking_filter``, whose
``same_model`` rule refuses unsigned blocks; this codec applies the provenance rule instead.

The parser reads one JSON object per line. As the recordings show, text comes as
``message.content`` fragments, reasoning as ``message.thinking``, tool calls whole in one line
(with an ``id`` only on newer servers: one is minted when absent), and the last line has
``done: true``, ``done_reason`` and the token counts. An ``{"error": ...}`` line inside a 200
stream is raised as a classified error.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from metis.errors import AdapterError, ConfigError, ErrorClass, ProtocolError, redact
from metis.ids import new_ulid
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.model.response import StopKind, StopReason
from metis.pipeline.call import Call
from metis.providers.codec import Codec
from metis.providers.http_errors import body_excerpt, http_error, json_body
from metis.providers.message_builder import MessageBuilder

log = logging.getLogger("metis")

_TEXT, _THINKING = "text", "thinking"
_MALFORMED = (KeyError, TypeError, IndexError, AttributeError, ValueError)
_LEVELS = ("low", "medium", "high")
_CAPABILITY = re.compile(
    r"does not support (tools|thinking|chat|completion|generate|insert|vision|images)"
    r"|missing data required for image input",
    re.IGNORECASE,
)
_MISSING_MODEL = re.compile(r"model ['\"]([^'\"]+)['\"] not found", re.IGNORECASE)
_OUT_OF_MEMORY = re.compile(r"requires more system memory|out of memory|unable to allocate", re.I)


# Encoding ----------------------------------------------------------------------------------

_NO_KNOBS: Mapping[str, Any] = MappingProxyType({})


def encode(
    request: CanonicalRequest,
    call: Call,
    knobs: Mapping[str, Any] = _NO_KNOBS,
    context_tokens: int | None = None,
) -> dict[str, Any]:
    """The /api/chat body; ``knobs`` are the adapter's options (num_ctx, keep_alive, think,
    model_options) and ``context_tokens`` the model's window, sent as num_ctx by default."""
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    names = {
        block.id: block.name
        for message in request.messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }
    for i, message in enumerate(request.messages):
        message_id = message.id or f"messages[{i}]"
        if message.role is Role.ASSISTANT:
            messages.append(_assistant(message, message_id, call))
        else:
            messages.extend(_user(message, message_id, call, names))
    body: dict[str, Any] = {"model": call.wire_model, "messages": messages}
    tools = _tools(request, call)
    if tools:
        body["tools"] = tools
    if request.output_schema is not None:
        body["format"] = request.output_schema
    if request.thinking is not None:
        body["think"] = _think(request.thinking.budget_tokens, knobs.get("think"))
    extra = knobs.get("model_options") or {}
    if not isinstance(extra, dict):
        raise ConfigError("AdapterConfig.options['model_options'] must map Ollama option names")
    options: dict[str, Any] = dict(extra)
    options["num_predict"] = request.max_output_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.stop_sequences:
        options["stop"] = list(request.stop_sequences)
    num_ctx = knobs.get("num_ctx", context_tokens)
    if num_ctx is not None:
        options["num_ctx"] = num_ctx
    body["options"] = options
    if "keep_alive" in knobs:
        body["keep_alive"] = knobs["keep_alive"]
    body["stream"] = bool(request.stream)
    return body


def _user(
    message: Message, message_id: str, call: Call, names: dict[str, str]
) -> list[dict[str, Any]]:
    """Tool results first, each its own ``role: tool`` message, then the rest as one turn."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    images: list[str] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            out.append(_tool_message(block, message_id, call, names))
        elif isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ImageBlock) and message.role is not Role.SYSTEM:
            if isinstance(block.source, Base64ImageSource):
                images.append(block.source.data)
            else:
                reason = "Ollama takes base64 images only and fetches no URL"
                call.warn_dropped("image", reason, message_id=message_id)
        else:
            _drop(call, block, message.role, message_id)
    if message.role is Role.SYSTEM:  # system_hoist normally leaves none; keep it in place
        out.append({"role": "system", "content": "\n".join(texts)})
    elif texts or images or not out:
        turn: dict[str, Any] = {"role": "user", "content": "\n".join(texts)}
        if images:
            turn["images"] = images
        out.append(turn)
    return out


def _tool_message(
    block: ToolResultBlock, message_id: str, call: Call, names: dict[str, str]
) -> dict[str, Any]:
    if not isinstance(block.content, str):
        for part in block.content:
            if not isinstance(part, TextBlock):
                reason = "an Ollama tool message holds text only"
                call.warn_dropped(
                    part.type, reason, message_id=message_id, tool_use_id=block.tool_use_id
                )
    text = block.text()
    out: dict[str, Any] = {"role": "tool", "content": "Error: " + text if block.is_error else text}
    name = names.get(block.tool_use_id)
    if name is not None:
        out["tool_name"] = name
    out["tool_call_id"] = block.tool_use_id
    return out


def _assistant(message: Message, message_id: str, call: Call) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            function = {"name": block.name, "arguments": block.input}
            calls.append({"id": block.id, "function": function})
        elif isinstance(block, ThinkingBlock) and call.produced(block.provider_raw):
            reasoning.append(block.thinking)
        elif isinstance(block, ThinkingBlock):
            call.warn_dropped("thinking", _foreign(block, call), message_id=message_id)
        else:
            _drop(call, block, message.role, message_id)
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        out["thinking"] = "\n\n".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _foreign(block: ThinkingBlock, call: Call) -> str:
    origin = block.provider_raw
    if origin is None:
        return "its producing provider and model are unknown"
    if origin.provider != call.provider:
        return f"it was produced by {origin.provider}, not {call.provider}"
    return f"it was produced by model {origin.model}, not {call.model}"


def _drop(call: Call, block: ContentBlock, role: Role, message_id: str) -> None:
    reason = f"Ollama cannot carry a {block.type} block in a {role.value} message"
    call.warn_dropped(block.type, reason, message_id=message_id)


def _tools(request: CanonicalRequest, call: Call) -> list[dict[str, Any]]:
    """Ollama has no tool_choice: ``none`` sends no tools, a named tool only that one; ``any``
    cannot be enforced, nor can a named tool be forced, and the log says so."""
    choice = request.tool_choice
    tools = request.tools
    if choice is not None and choice.type == "none":
        return []
    if choice is not None and choice.type in ("any", "tool") and tools:
        if choice.type == "tool":
            tools = [tool for tool in tools if tool.name == choice.name]
        log.warning(
            "ollama cannot force a tool call (tool_choice %r); the model may answer in text",
            choice.type,
            extra={
                "event": "metis.tool_choice_not_enforced",
                "request_id": call.request_id,
                "adapter": call.provider,
            },
        )
    return [_tool(tool) for tool in tools]


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.input_schema
    return {"type": "function", "function": function}


def _think(budget: int, configured: Any) -> bool | str:
    if configured == "budget":  # gpt-oss levels, the way openai_chat maps a budget to effort
        return "low" if budget < 2048 else "medium" if budget < 8192 else "high"
    if configured in _LEVELS:
        return str(configured)
    return True


# Parsing -----------------------------------------------------------------------------------


class OllamaStreamParser:
    """Feeds Ollama's chat objects (NDJSON lines, or one whole body) to a builder."""

    __slots__ = ("_builder", "_calls", "_done")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._calls = 0
        self._done = False

    def feed(self, obj: dict[str, Any]) -> None:
        message = obj.get("message")
        if message.__class__ is dict and not self._done and obj.get("done") is False:
            content = message.get("content")
            if len(message) == 2 and content.__class__ is str:
                builder = self._builder
                if not builder.started:
                    builder.start(None, _model(obj))
                if content:
                    builder.text(_TEXT, content)  # the hot path: a bare text fragment
                return
        self._object(obj)

    def end(self) -> None:
        if not self._done:
            raise ProtocolError(
                "ollama stream ended before its done line", provider=self._builder.provider
            )

    def _object(self, obj: dict[str, Any]) -> None:
        if "error" in obj:
            raise _error(None, {}, obj.get("error"), provider=self._builder.provider)
        if self._done:
            raise ProtocolError(
                f"ollama sent a line after its done line: {_dump(obj)}",
                provider=self._builder.provider,
            )
        builder = self._builder
        try:
            if not builder.started:
                builder.start(None, _model(obj))
            message = obj.get("message")
            if message is not None:
                self._message(message)
            if obj.get("done") is True:
                self._finish(obj)
        except _MALFORMED as exc:
            raise _malformed(obj, exc, builder.provider) from None

    def _message(self, message: dict[str, Any]) -> None:
        builder = self._builder
        thinking = message.get("thinking")
        if thinking:
            builder.thinking(_THINKING, _str(thinking, "thinking"))
        content = message.get("content")
        if content:
            builder.text(_TEXT, _str(content, "content"))
        for item in message.get("tool_calls") or ():
            self._tool_call(item)

    def _tool_call(self, item: dict[str, Any]) -> None:
        function = item["function"]
        name = function["name"]
        if not isinstance(name, str) or not name:
            raise TypeError("a tool call without a function name")
        tool_id = item.get("id")
        if not isinstance(tool_id, str) or not tool_id:
            tool_id = f"call_{new_ulid()}"  # older servers issue no ids
        key = ("tool", self._calls)
        self._calls += 1
        builder = self._builder
        builder.tool_start(key, tool_id, name)
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            raw = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
            builder.tool_input(key, raw)
            builder.tool_end(key, arguments)
        elif isinstance(arguments, str):  # a JSON string, as compatible servers send
            builder.tool_input(key, arguments)
            builder.close(key)
        elif arguments is None:
            builder.tool_end(key, {})
        else:
            raise TypeError(f"tool call arguments are a {type(arguments).__name__}")

    def _finish(self, obj: dict[str, Any]) -> None:
        self._done = True
        prompt, output = obj.get("prompt_eval_count"), obj.get("eval_count")
        if prompt is not None or output is not None:
            self._builder.usage(_count(prompt), _count(output), 0, 0)
        self._builder.stop(stop_reason(obj.get("done_reason"), self._calls > 0))
        self._builder.finish()


def parse_body(body: dict[str, Any], builder: MessageBuilder) -> None:
    """A non-streamed answer: one object, ``done: true``, through the same handling."""
    parser = OllamaStreamParser(builder)
    parser._object(body)
    if not builder.completed:
        raise ProtocolError(f"ollama answered without done: true: {_dump(body)}")


def stop_reason(raw: Any, called: bool) -> StopReason:
    """``stop`` is the end of the turn, or a tool turn when the message holds tool calls (a
    stop sequence also says ``stop``); ``length`` is the token limit; anything else (``load``,
    ``unload``, none at all from old servers) is provider-specific."""
    if raw is not None and not isinstance(raw, str):
        raise TypeError(f"done_reason is a {type(raw).__name__}")
    if raw == "length":
        return StopReason(kind=StopKind.MAX_TOKENS, raw=raw)
    if called and raw in ("stop", None):
        return StopReason(kind=StopKind.TOOL_USE, raw=raw)
    if raw == "stop":
        return StopReason(kind=StopKind.END_TURN, raw=raw)
    return StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw=raw)


def _model(obj: dict[str, Any]) -> str | None:
    model = obj.get("model")
    return model if isinstance(model, str) else None


def _count(value: Any) -> int:
    if value is None:
        return 0
    if value.__class__ is not int:
        raise TypeError(f"a token count is a {type(value).__name__}")
    return int(value)


def _str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} is a {type(value).__name__}, not a string")
    return value


def _malformed(obj: Any, exc: Exception, provider: str) -> ProtocolError:
    detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
    return ProtocolError(
        f"ollama sent a malformed object ({detail}): {_dump(obj)}", provider=provider
    )


def _dump(obj: Any) -> str:
    return json.dumps(obj, default=repr, ensure_ascii=False)[:200]


# Errors ------------------------------------------------------------------------------------


def error_from_http(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    data = json_body(body)
    message = data.get("error") if data is not None else None
    if not isinstance(message, str):
        message = body_excerpt(body) if body.strip() else ""
    return _error(status, headers, message)


def _error(
    status: int | None, headers: Mapping[str, str], raw: Any, provider: str | None = None
) -> AdapterError:
    """Ollama's errors are bare strings (``{"error": "..."}``); the text says what happened."""
    message = raw if isinstance(raw, str) else _dump(raw)
    cls: ErrorClass | None = None
    retryable: bool | None = None
    shown = message
    missing = _MISSING_MODEL.search(message)
    if _CAPABILITY.search(message):
        cls = ErrorClass.CAPABILITY
    elif missing or (status == 404 and "model" in message and "not found" in message):
        model = missing.group(1) if missing else "<model>"
        cls = ErrorClass.INVALID_REQUEST
        shown = f"{message}; pull it first: `ollama pull {model}`"
    elif "server busy" in message:
        cls = ErrorClass.OVERLOADED  # 503 when the server's request queue is full
    elif _OUT_OF_MEMORY.search(message):
        cls, retryable = ErrorClass.SERVER_ERROR, False  # the model does not fit: retrying won't
    error = http_error(
        status, headers, shown, error_class=cls, retryable=retryable, provider=provider
    )
    error.provider_message = redact(message)
    return error


class OllamaCodec:
    """Ollama's codec; the stack's encode stage gives it the adapter's options
    (:meth:`for_adapter`), which shape each request."""

    name = "ollama"
    stream_parser = staticmethod(OllamaStreamParser)
    parse_body = staticmethod(parse_body)
    error_from_http = staticmethod(error_from_http)

    def __init__(
        self,
        knobs: Mapping[str, Any] = _NO_KNOBS,
        capabilities_for: Callable[[str], AdapterCapabilities] | None = None,
    ) -> None:
        self._knobs = knobs
        self._capabilities_for = capabilities_for

    def for_adapter(
        self, options: Mapping[str, Any], capabilities_for: Callable[[str], AdapterCapabilities]
    ) -> OllamaCodec:
        """This codec with an adapter's options and its models' context windows."""
        return OllamaCodec(options, capabilities_for)

    def encode(self, request: CanonicalRequest, call: Call) -> dict[str, Any]:
        found = self._capabilities_for
        window = found(call.wire_model).max_context_tokens if found is not None else None
        return encode(request, call, self._knobs, window)


codec: Codec = OllamaCodec()
