"""The Ollama native chat codec (``POST /api/chat``, streamed as NDJSON).

``encode`` builds the request: the system prompt as the first message, tool results as
``role: tool`` messages naming the tool (``tool_name``) and the call (``tool_call_id``, which
older servers ignore), ``is_error`` as an ``"Error: "`` prefix, tool-call arguments as JSON
objects, images as bare base64 (URL images are dropped: Ollama fetches nothing), generation
settings under ``options``. ``options.num_ctx`` is the context the adapter declares
(``max_context_tokens``), so the window capability_check enforces is the one Ollama allocates
instead of its silently truncating default. Knobs from the adapter's settings
(``OllamaSettings``): ``num_ctx`` (a number, or null to leave Ollama's default),
``keep_alive``, ``think`` (what to send when the request asks for thinking: true, a level
``low``/``medium``/``high`` for gpt-oss, or ``budget`` to derive the level from
``budget_tokens``) and ``model_options`` (more Ollama options).

Reasoning goes back as the assistant message's ``thinking`` only to the provider and model
that produced it: a local model's reasoning has no signature to check, and its chat template
expects it (gpt-oss, qwen3 in tool loops). So the stack has no ``thinking_filter``, whose
``same_model`` rule refuses unsigned blocks; this codec applies the provenance rule instead.

Reading Ollama's answers (the stream parser, ``parse_body``, ``error_from_http``) is in
:mod:`metis.wire.ollama.read`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from metis.errors import ConfigError
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.knobs import ReasoningEffort
from metis.model.media_fit import current_turn_start
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolDefinition
from metis.wire.codec import Codec, EncodeContext
from metis.wire.encoded_messages import sent_schema
from metis.wire.knobs.forms import effort_of
from metis.wire.knobs.reasoning import nearest_level
from metis.wire.knobs.sampling import sampling_fields
from metis.wire.media import cannot_carry, project_attachments
from metis.wire.ollama.read import OllamaStreamParser, parse_body
from metis.wire.ollama.read import error_from_http as error_from_http  # stages read it here
from metis.wire.opaque import sent_back

log = logging.getLogger("metis")

_LEVELS: tuple[ReasoningEffort, ...] = ("low", "medium", "high")


# Encoding ----------------------------------------------------------------------------------

_NO_KNOBS: Mapping[str, Any] = MappingProxyType({})


def encode(
    request: CanonicalRequest,
    call: EncodeContext,
    knobs: Mapping[str, Any] = _NO_KNOBS,
    context_tokens: int | None = None,
) -> dict[str, Any]:
    """The /api/chat body; ``knobs`` are the adapter's settings (num_ctx, keep_alive, think,
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
    start = current_turn_start(request.messages)
    for i, message in enumerate(request.messages):
        message_id = message.id or f"messages[{i}]"
        if message.role is Role.ASSISTANT:
            messages.append(_assistant(message, message_id, call))
        else:
            messages.extend(_user(message, message_id, call, names, current=i >= start))
    body: dict[str, Any] = {"model": call.wire_model, "messages": messages}
    tools = _tools(request, call)
    if tools:
        body["tools"] = tools
    if request.output_schema is not None:
        body["format"] = request.output_schema
    if request.thinking is not None:
        body["think"] = _think(request.thinking, knobs.get("think"), call)
    extra = knobs.get("model_options") or {}
    if not isinstance(extra, dict):
        raise ConfigError("the model_options setting must map Ollama option names")
    options: dict[str, Any] = dict(extra)
    options["num_predict"] = request.max_output_tokens
    options.update(sampling_fields(request))  # Ollama's options use the same names
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
    message: Message, message_id: str, call: EncodeContext, names: dict[str, str], current: bool
) -> list[dict[str, Any]]:
    """Tool results first, each its own ``role: tool`` message, then the rest as one turn (an
    image by URL refused in the turn being sent, as a file the wire cannot carry is)."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    images: list[str] = []
    attached: list[ContentBlock] = []  # a tool message holds text: its images follow it
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            projected = project_attachments(block)
            out.append(_tool_message(projected.result, names))
            attached += projected.attachments
    for block in [*attached, *message.content]:
        if isinstance(block, ToolResultBlock):
            continue
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ImageBlock) and message.role is not Role.SYSTEM:
            if isinstance(block.source, Base64ImageSource):
                images.append(block.source.data)
            else:
                reason = "Ollama takes base64 images only and fetches no URL"
                cannot_carry(call, block, reason, message_id, current)
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


def _tool_message(block: ToolResultBlock, names: dict[str, str]) -> dict[str, Any]:
    text = block.text
    out: dict[str, Any] = {"role": "tool", "content": "Error: " + text if block.is_error else text}
    name = names.get(block.tool_use_id)
    if name is not None:
        out["tool_name"] = name
    out["tool_call_id"] = block.tool_use_id
    return out


def _assistant(message: Message, message_id: str, call: EncodeContext) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
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
        elif isinstance(block, OpaqueBlock):  # a message field, only back to where it came from
            fields.update(sent_back(block, call, message_id) or {})
        else:
            _drop(call, block, message.role, message_id)
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts), **fields}
    if reasoning:
        out["thinking"] = "\n\n".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _foreign(block: ThinkingBlock, call: EncodeContext) -> str:
    origin = block.provider_raw
    if origin is None:
        return "its producing provider and model are unknown"
    if origin.provider != call.provider:
        return f"it was produced by {origin.provider}, not {call.provider}"
    return f"it was produced by model {origin.model}, not {call.model}"


def _drop(call: EncodeContext, block: ContentBlock, role: Role, message_id: str) -> None:
    reason = f"Ollama cannot carry a {block.type} block in a {role.value} message"
    call.warn_dropped(block.type, reason, message_id=message_id)


def _tools(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
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
    function["parameters"] = sent_schema(tool.input_schema)
    return {"type": "function", "function": function}


def _think(thinking: ThinkingConfig, configured: Any, call: EncodeContext) -> bool | str:
    """``think``: false for effort ``none``; a level where the model takes levels (the
    ``think`` setting ``budget``: the request's effort, or the table's for its budget, as
    openai_chat's); the configured level; else true (a level asked for is then not applied)."""
    if thinking.effort == "none":
        return False
    if configured == "budget":
        return nearest_level(effort_of(thinking, _LEVELS), _LEVELS)
    if configured in _LEVELS:
        return str(configured)
    if thinking.effort is not None:
        call.warn_dropped(
            "reasoning",
            f"effort {thinking.effort!r}: sent as think: true, thinking on or off; a model "
            "that takes levels (gpt-oss) is sent them with settings={'think': 'budget'}",
        )
    return True


class OllamaCodec:
    """Ollama's codec; the stack's encode stage gives it the adapter's settings
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
        """This codec with an adapter's settings and its models' context windows."""
        return OllamaCodec(options, capabilities_for)

    def encode(self, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
        found = self._capabilities_for
        window = found(call.wire_model).max_context_tokens if found is not None else None
        return encode(request, call, self._knobs, window)


codec: Codec = OllamaCodec()
