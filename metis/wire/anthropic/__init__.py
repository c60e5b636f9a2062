"""The Anthropic Messages codec (``POST /v1/messages``, docs/contract.md §8).

Sans-IO: :func:`encode` builds the JSON body from a canonical request; the stream parser and
``parse_body`` (in :mod:`metis.wire.anthropic.read`) and ``error_from_http`` (in
:mod:`metis.wire.anthropic.errors`) read what Anthropic answers.
"""

from __future__ import annotations

import copy
import logging
from functools import partial
from typing import Any

from metis.model.content import (
    EMPTY_ERROR_RESULT,
    AudioBlock,
    Base64ImageSource,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    Role,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from metis.model.media import FileIdSource
from metis.model.media_fit import current_turn_start
from metis.model.memo import MessageMemo
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.wire.anthropic import server_tools
from metis.wire.anthropic.cache import WireMessages, hinted_blocks
from metis.wire.anthropic.documents import FILES_BETA, document, names_files
from metis.wire.anthropic.documents import At as _At
from metis.wire.anthropic.errors import error_from_http
from metis.wire.anthropic.knobs import sampling_fields, thinking_fields
from metis.wire.anthropic.read import AnthropicStreamParser, parse_body
from metis.wire.closed_schema import closed_schema_or_reason, strict_input_schema
from metis.wire.codec import Codec, EncodeContext
from metis.wire.compaction import ANTHROPIC_BETA, anthropic_asks, anthropic_fields
from metis.wire.encoded_messages import encoded, encoded_history
from metis.wire.media import cannot_carry
from metis.wire.opaque import elsewhere, own_item
from metis.wire.server_replay import for_provider

log = logging.getLogger("metis")

# Encoding ----------------------------------------------------------------------------------


def encode(request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
    body: dict[str, Any] = {"model": call.wire_model, "max_tokens": request.max_output_tokens}
    system = _system(request, call)
    if system:
        body["system"] = system
    history = partial(_messages, request.messages)
    body["messages"] = encoded_history(request.messages, "anthropic", call, history).copy()
    if request.tools or request.server_tools:
        tools = [_tool(tool, call) for tool in request.tools]
        body["tools"] = tools + server_tools.declarations(request, call)
        choice = _tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
        if container := server_tools.container(request):
            body["container"] = container
    if request.stop_sequences:
        body["stop_sequences"] = list(request.stop_sequences)
    if request.thinking is not None:
        body.update(thinking_fields(request.thinking, request.max_output_tokens, call.wire_model))
    body.update(sampling_fields(request, body.get("thinking"), call))
    if request.output_schema is not None:
        # Structured output takes closed objects only; one that cannot be closed goes as
        # written, for pre_send_check to refuse in the API's words.
        closed, _ = closed_schema_or_reason(request.output_schema)
        output_config = body.setdefault("output_config", {})
        output_config["format"] = {"type": "json_schema", "schema": closed or request.output_schema}
    if request.compaction is not None:
        body.update(anthropic_fields(request.compaction))
    body["stream"] = bool(request.stream)
    return body


def _system(request: CanonicalRequest, call: EncodeContext) -> str:
    parts = [request.system_prompt or ""]
    for i, message in enumerate(request.messages):
        if message.role is Role.SYSTEM:  # system_hoist normally leaves none behind
            log.warning(
                "anthropic encode: SYSTEM message %s was not hoisted; sending it as system text",
                message.id or f"messages[{i}]",
            )
            parts.append(message.text)
    return "\n\n".join(part for part in parts if part)


def _messages(messages: list[Message], call: EncodeContext) -> WireMessages:
    out: list[dict[str, Any]] = []
    start = current_turn_start(messages)
    for i, message in enumerate(messages):
        if message.role is Role.SYSTEM:
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        where = message.id or f"messages[{i}]"
        current = i >= start
        make = partial(_wire_blocks, message, where, current=current)
        blocks = encoded(_MEMO, message, current, call, make)
        if not blocks:  # Anthropic rejects empty content; nothing was sendable
            continue
        if out and out[-1]["role"] == role:  # Anthropic wants user and assistant to alternate
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})  # the kept list stays as made
    for message_out in out:
        blocks = message_out["content"]
        if message_out["role"] == "user" and len(blocks) > 1:  # tool results open a user turn
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # (a stable sort)
    return WireMessages(out)


_MEMO: MessageMemo[list[dict[str, Any]]] = MessageMemo()


def _wire_blocks(
    message: Message, where: str, call: EncodeContext, current: bool
) -> list[dict[str, Any]]:
    """The wire blocks of one message (``current``: in the turn being sent)."""
    role = "assistant" if message.role is Role.ASSISTANT else "user"
    content = for_provider(message.content, call, where)
    at = _At(call, where, current=current, assistant=role == "assistant")
    pairs = [(block, wire) for block in content if (wire := _block(block, at))]
    return hinted_blocks(message, pairs, call, where)


def _block(block: ContentBlock, at: _At) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # Anthropic refuses text blocks that are empty or only whitespace.
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ImageBlock):
        if at.assistant:  # an image model's picture (Gemini's) in the history
            reason = "Anthropic takes images only in user messages"
            cannot_carry(at.call, block, reason, at.where, at.current)
            return None
        return _image(block)
    if isinstance(block, DocumentBlock | AudioBlock | VideoBlock):
        return document(block, at)
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        return _tool_result(block, at)
    if isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
        return copy.deepcopy(block.provider_raw.data) if block.provider_raw else None  # verbatim
    if isinstance(block, ThinkingBlock):
        if not block.signature:
            at.call.warn_dropped(
                "thinking", "Anthropic accepts only signed thinking blocks", message_id=at.where
            )
            return None
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, OpaqueBlock):
        item = own_item(block, at.call.provider)
        if item is None:
            at.call.warn_dropped(block.kind, elsewhere(block), message_id=at.where)
        return item
    return {"type": "redacted_thinking", "data": block.data}


def _image(block: ImageBlock) -> dict[str, Any]:
    source = block.source
    if isinstance(source, Base64ImageSource):
        wire = {"type": "base64", "media_type": source.media_type, "data": source.data}
    elif isinstance(source, FileIdSource):  # headers_for adds the Files API beta
        wire = {"type": "file", "file_id": source.file_id}
    else:
        wire = {"type": "url", "url": source.url}
    return {"type": "image", "source": wire}


def _tool_result(block: ToolResultBlock, at: _At) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    content: str | list[dict[str, Any]]
    if isinstance(block.content, str):
        content = block.content
    else:
        content = [wire for part in block.content if (wire := _block(part, at)) is not None]
    if block.is_error:
        out["content"] = content or EMPTY_ERROR_RESULT  # Anthropic rejects an empty error
        out["is_error"] = True
    elif content:
        out["content"] = content
    return out


def _tool(tool: ToolDefinition, call: EncodeContext) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"], strict = strict_input_schema(tool, call)
    if strict:
        out["strict"] = True
    return out


def _tool_choice(request: CanonicalRequest) -> dict[str, Any] | None:
    choice = request.tool_choice
    out: dict[str, Any]
    if choice is None:
        if request.parallel_tool_calls is not False:
            return None
        out = {"type": "auto"}
    elif choice.type == "tool":
        out = {"type": "tool", "name": choice.name}
    else:
        out = {"type": choice.type}
    if request.parallel_tool_calls is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True  # tool_choice none takes no such field
    return out


class AnthropicCodec:
    name = "anthropic"
    supports_compaction = True
    encode = staticmethod(encode)
    stream_parser = staticmethod(AnthropicStreamParser)
    parse_body = staticmethod(parse_body)
    error_from_http = staticmethod(error_from_http)

    @staticmethod
    def headers_for(body: dict[str, Any]) -> dict[str, str]:
        """The ``anthropic-beta`` header the body's server tools, compaction and Files API
        ids need."""
        betas = [server_tools.beta_header(body.get("tools") or [])]
        if anthropic_asks(body):
            betas.append(ANTHROPIC_BETA)
        if names_files(body):
            betas.append(FILES_BETA)
        beta = ",".join(b for b in betas if b)
        return {"anthropic-beta": beta} if beta else {}


codec: Codec = AnthropicCodec()
