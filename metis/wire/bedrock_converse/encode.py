"""Canonical request -> Bedrock Converse body (``POST /model/{modelId}/converse``).

The model is in the URL, not the body. Content blocks are one-key objects (``{"text": ...}``,
``{"toolUse": {...}}``, ``{"toolResult": {...}}``, ``{"reasoningContent": {...}}``,
``{"image": {...}}``), as in the Converse API reference's ``ContentBlock``. Images travel as
base64 in ``source.bytes`` (the REST form of the SDKs' raw bytes); Converse takes no URL
images, only S3 locations, so those are dropped with the structured WARN.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from metis.model.content import (
    AudioBlock,
    Base64ImageSource,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    OpaqueBlock,
    RedactedThinkingBlock,
    Role,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultContent,
    ToolUseBlock,
    VideoBlock,
)
from metis.model.media import FileIdSource
from metis.model.media_fit import current_turn_start
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.wire.bedrock_converse.cache import hinted_blocks
from metis.wire.bedrock_converse.knobs import model_fields
from metis.wire.bedrock_converse.media import media
from metis.wire.bedrock_converse.server_tools import declarations
from metis.wire.closed_schema import closed_schema_or_reason, strict_input_schema
from metis.wire.codec import EncodeContext
from metis.wire.knobs.fit import report_one_call_a_turn
from metis.wire.media import AFTER_THIS_RESULT, cannot_carry, project_attachments
from metis.wire.opaque import sent_back
from metis.wire.server_replay import messages_for_provider
from metis.wire.strict_schema import schema_name

EMPTY_RESULT = "(no output)"
_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}


def encode(request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": _messages(request, call)}
    system = _system(request)
    if system:
        body["system"] = [{"text": system}]
    sampling, fields = model_fields(request, call)
    inference: dict[str, Any] = {"maxTokens": request.max_output_tokens, **sampling}
    if request.stop_sequences:
        inference["stopSequences"] = list(request.stop_sequences)
        # which one ended the reply, from the models that tell (Converse ignores the path
        # for the others)
        body["additionalModelResponseFieldPaths"] = ["/stop_sequence"]
    body["inferenceConfig"] = inference
    tools = _tool_config(request, call)
    if tools is not None:
        body["toolConfig"] = tools
    if fields:
        body["additionalModelRequestFields"] = fields
    if request.output_schema is not None:
        body["outputConfig"] = {"textFormat": _text_format(request.output_schema)}
    return body


def _text_format(schema: dict[str, Any]) -> dict[str, Any]:
    """``outputConfig.textFormat``: the schema as a JSON string, every object closed as
    structured output requires (one that cannot be closed goes as written, for the pre-send
    rules to refuse), named as OpenAI's are."""
    closed, _ = closed_schema_or_reason(schema)
    definition: dict[str, Any] = {"schema": json.dumps(closed or schema)}
    definition["name"] = schema_name(schema.get("title"))
    description = schema.get("description")
    if isinstance(description, str) and description:
        definition["description"] = description
    return {"type": "json_schema", "structure": {"jsonSchema": definition}}


def _system(request: CanonicalRequest) -> str:
    parts = [request.system_prompt or ""]
    parts += [m.text for m in request.messages if m.role is Role.SYSTEM]
    return "\n\n".join(part for part in parts if part)


def _messages(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    start = current_turn_start(request.messages)
    names: set[str] = set()  # document names, unique in the request
    for i, message in enumerate(messages_for_provider(request.messages, call)):
        if message.role is Role.SYSTEM:
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        at = _At(call, message.id or f"messages[{i}]", i >= start, names, role)
        encoded = [
            (block if last else None, wire)
            for block in message.content
            for last, wire in _last_flagged(_blocks(block, at))
        ]
        blocks = hinted_blocks(message, encoded)
        if not blocks:  # Converse refuses a message with no content
            continue
        if out and out[-1]["role"] == role:  # Converse wants user and assistant to alternate
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


@dataclass(frozen=True, slots=True)
class _At:
    """Where a block is encoded: the call, the message and its role, whether it is in the turn
    being sent, and the document names the request has used."""

    call: EncodeContext
    where: str
    current: bool
    names: set[str]
    role: str


def _last_flagged(wires: list[dict[str, Any]]) -> list[tuple[bool, dict[str, Any]]]:
    """Each wire block of one canonical block, flagged True on the last (where its cache hint
    goes)."""
    return [(i == len(wires) - 1, wire) for i, wire in enumerate(wires)]


def _blocks(block: ContentBlock, at: _At) -> list[dict[str, Any]]:
    """The block's Converse blocks: one, none, or a tool result and the audio moved out of it
    (a tool result holds no audio; it follows the result in the same user message)."""
    if isinstance(block, ToolResultBlock):
        kept = (ImageBlock, DocumentBlock, VideoBlock)
        projected = project_attachments(block, kept, where=AFTER_THIS_RESULT)
        moved = [b for part in projected.attachments if (b := _block(part, at))]
        return [{"toolResult": _tool_result(projected.result, at)}, *moved]
    out = _block(block, at)
    return [out] if out else []


def _block(block: ContentBlock | ToolResultContent, at: _At) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # Converse refuses blank text ("The text field in the ContentBlock object is blank").
        return {"text": block.text} if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.input}}
    if isinstance(block, ImageBlock):
        if at.role != "user":  # an image model's picture (Gemini's) in the history
            reason = "Converse takes images only in user messages"
            cannot_carry(at.call, block, reason, at.where, at.current)
            return None
        return _image(block, at)
    if isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
        return copy.deepcopy(block.provider_raw.data) if block.provider_raw else None  # verbatim
    if isinstance(block, DocumentBlock | AudioBlock | VideoBlock):
        wire = media(block, at.names) if at.role == "user" else "not in an assistant message"
        if isinstance(wire, str):
            cannot_carry(at.call, block, wire, at.where, at.current)
            return None
        return wire
    if isinstance(block, ThinkingBlock):
        if not block.signature:
            at.call.warn_dropped(
                "thinking", "Bedrock accepts only signed reasoning blocks", message_id=at.where
            )
            return None
        text = {"text": block.thinking, "signature": block.signature}
        return {"reasoningContent": {"reasoningText": text}}
    if isinstance(block, RedactedThinkingBlock):
        return {"reasoningContent": {"redactedContent": block.data}}
    if isinstance(block, OpaqueBlock):  # as Converse gave it, only back to where it came from
        return sent_back(block, at.call, at.where)
    return None  # a tool result inside a tool result has no form


def _image(block: ImageBlock, at: _At) -> dict[str, Any] | None:
    """The image's bytes or S3 location (a file id ``s3://...``); one by URL (or of another
    type) is refused in the turn being sent, as a file is, and dropped from an older one."""
    source = block.source
    image_format = _IMAGE_FORMATS.get(block.media_type() or "")
    wire: dict[str, Any] | None = None
    if isinstance(source, Base64ImageSource):
        wire = {"bytes": source.data}
    elif isinstance(source, FileIdSource) and source.file_id.startswith("s3://"):
        wire = {"s3Location": {"uri": source.file_id}}
    if wire is None or image_format is None:
        reason = (
            "Converse takes images as bytes or S3 locations in png, jpeg, gif or webp, not by URL"
        )
        cannot_carry(at.call, block, reason, at.where, at.current)
        return None
    return {"image": {"format": image_format, "source": wire}}


def _tool_result(block: ToolResultBlock, at: _At) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if isinstance(block.content, str):
        content = [{"text": block.content}] if block.content else []
    else:
        content = [wire for part in block.content if (wire := _block(part, at))]
    return {
        "toolUseId": block.tool_use_id,
        "content": content or [{"text": EMPTY_RESULT}],  # Converse wants at least one part
        "status": "error" if block.is_error else "success",
    }


def _tool_config(request: CanonicalRequest, call: EncodeContext) -> dict[str, Any] | None:
    if not request.tools and not request.server_tools:
        return None
    tools = [_tool(tool, call) for tool in request.tools] + declarations(request, call)
    config: dict[str, Any] = {"tools": tools}
    report_one_call_a_turn(request, call)  # its toolChoice has no switch
    choice = request.tool_choice
    if choice is not None and choice.type == "tool":
        config["toolChoice"] = {"tool": {"name": choice.name}}
    elif choice is not None and choice.type == "any":
        config["toolChoice"] = {"any": {}}
    elif choice is not None and choice.type == "auto":
        config["toolChoice"] = {"auto": {}}
    elif choice is not None and choice.type == "none":
        if not _history_has_tools(request):
            return None  # Converse has no "none"; without tools the model cannot call one
        call.warn_dropped(
            "tool_choice",
            "Converse has no tool choice none and the history's tool blocks need the tools "
            "declared; the model may call one",
        )
    return config


def _history_has_tools(request: CanonicalRequest) -> bool:
    """Converse refuses toolUse / toolResult blocks when the request declares no tools."""
    return any(
        isinstance(block, ToolUseBlock | ToolResultBlock)
        for message in request.messages
        for block in message.content
    )


def _tool(tool: ToolDefinition, call: EncodeContext) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": tool.name}
    if tool.description:
        spec["description"] = tool.description
    schema, strict = strict_input_schema(tool, call)
    spec["inputSchema"] = {"json": schema}
    if strict:
        spec["strict"] = True
    return {"toolSpec": spec}
