"""Canonical request -> Bedrock Converse body (``POST /model/{modelId}/converse``).

The model is in the URL, not the body. Content blocks are one-key objects (``{"text": ...}``,
``{"toolUse": {...}}``, ``{"toolResult": {...}}``, ``{"reasoningContent": {...}}``,
``{"image": {...}}``), as in the Converse API reference's ``ContentBlock``. Images travel as
base64 in ``source.bytes`` (the REST form of the SDKs' raw bytes); Converse takes no URL
images, only S3 locations, so those are dropped with the structured WARN.
"""

from __future__ import annotations

from typing import Any

from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.wire.bedrock_converse.cache import hinted_blocks
from metis.wire.bedrock_converse.knobs import model_fields
from metis.wire.codec import EncodeContext

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
    body["inferenceConfig"] = inference
    tools = _tool_config(request)
    if tools is not None:
        body["toolConfig"] = tools
    if fields:
        body["additionalModelRequestFields"] = fields
    return body


def _system(request: CanonicalRequest) -> str:
    parts = [request.system_prompt or ""]
    parts += [m.text() for m in request.messages if m.role is Role.SYSTEM]
    return "\n\n".join(part for part in parts if part)


def _messages(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(request.messages):
        if message.role is Role.SYSTEM:
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        message_id = message.id or f"messages[{i}]"
        encoded = [
            (block, wire) for block in message.content if (wire := _block(block, call, message_id))
        ]
        blocks = hinted_blocks(message, encoded)
        if not blocks:  # Converse refuses a message with no content
            continue
        if out and out[-1]["role"] == role:  # Converse wants user and assistant to alternate
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _block(block: ContentBlock, call: EncodeContext, message_id: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # Converse refuses blank text ("The text field in the ContentBlock object is blank").
        return {"text": block.text} if block.text.strip() else None
    if isinstance(block, ToolUseBlock):
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.input}}
    if isinstance(block, ToolResultBlock):
        return {"toolResult": _tool_result(block, call, message_id)}
    if isinstance(block, ImageBlock):
        return _image(block, call, message_id)
    if isinstance(block, ThinkingBlock):
        if not block.signature:
            call.warn_dropped(
                "thinking", "Bedrock accepts only signed reasoning blocks", message_id=message_id
            )
            return None
        text = {"text": block.thinking, "signature": block.signature}
        return {"reasoningContent": {"reasoningText": text}}
    redacted: RedactedThinkingBlock = block
    return {"reasoningContent": {"redactedContent": redacted.data}}


def _image(block: ImageBlock, call: EncodeContext, message_id: str) -> dict[str, Any] | None:
    source = block.source
    image_format = (
        _IMAGE_FORMATS.get(source.media_type) if isinstance(source, Base64ImageSource) else None
    )
    if not isinstance(source, Base64ImageSource) or image_format is None:
        call.warn_dropped(
            "image",
            "Converse takes images as bytes in png, jpeg, gif or webp, not by URL",
            message_id=message_id,
        )
        return None
    return {"image": {"format": image_format, "source": {"bytes": source.data}}}


def _tool_result(block: ToolResultBlock, call: EncodeContext, message_id: str) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if isinstance(block.content, str):
        content = [{"text": block.content}] if block.content else []
    else:
        content = [
            part_out
            for part in block.content
            if (
                part_out := (
                    _image(part, call, message_id)
                    if isinstance(part, ImageBlock)
                    else ({"text": part.text} if part.text else None)
                )
            )
        ]
    return {
        "toolUseId": block.tool_use_id,
        "content": content or [{"text": EMPTY_RESULT}],  # Converse wants at least one part
        "status": "error" if block.is_error else "success",
    }


def _tool_config(request: CanonicalRequest) -> dict[str, Any] | None:
    if not request.tools:
        return None
    config: dict[str, Any] = {"tools": [_tool(tool) for tool in request.tools]}
    choice = request.tool_choice
    if choice is not None and choice.type == "tool":
        config["toolChoice"] = {"tool": {"name": choice.name}}
    elif choice is not None and choice.type == "any":
        config["toolChoice"] = {"any": {}}
    elif choice is not None and choice.type == "auto":
        config["toolChoice"] = {"auto": {}}
    elif choice is not None and choice.type == "none" and not _history_has_tools(request):
        return None  # Converse has no "none"; without tools the model cannot call one
    return config


def _history_has_tools(request: CanonicalRequest) -> bool:
    """Converse refuses toolUse / toolResult blocks when the request declares no tools."""
    return any(
        isinstance(block, ToolUseBlock | ToolResultBlock)
        for message in request.messages
        for block in message.content
    )


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": tool.name}
    if tool.description:
        spec["description"] = tool.description
    spec["inputSchema"] = {"json": tool.input_schema}
    return {"toolSpec": spec}
