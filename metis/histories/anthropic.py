"""Stored conversations in Anthropic Messages form, in and out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metis.errors import InvalidRequestError
from metis.histories.common import Ids, dropped, items, mapping
from metis.histories.files import from_anthropic_document, to_anthropic_document
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    ProviderRaw,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultContent,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.media import AudioBlock, DocumentBlock, VideoBlock


def from_anthropic(
    messages: Iterable[Any], *, system: Any = None, model: str | None = None
) -> list[Message]:
    """Canonical messages from a Messages API ``messages`` list (and its ``system``). Thinking
    blocks are marked as made by Anthropic's ``model``, so their signatures go back only there."""
    ids = Ids()
    made_by = ProviderRaw(provider="anthropic", model=model)
    out: list[Message] = []
    if system:
        out.append(Message(role=Role.SYSTEM, content=_blocks(system, "system", ids, made_by)))
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        item = mapping(raw, where)
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise InvalidRequestError(f"{where}.role: expected user or assistant, got {role!r}")
        blocks = _blocks(item.get("content"), where, ids, made_by)
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        rest = [b for b in blocks if not isinstance(b, ToolResultBlock)]
        if results:  # tool results ride in a user turn on the wire; a tool turn here
            out.append(Message(role=Role.TOOL, content=list(results)))
        if rest or not results:
            out.append(Message(role=Role(role), content=rest))
    return out


def _blocks(content: Any, where: str, ids: Ids, made_by: ProviderRaw) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[ContentBlock] = []
    for j, raw in enumerate(items(content, f"{where}.content")):
        at = f"{where}.content[{j}]"
        block = _block(mapping(raw, at), at, ids, made_by)
        if block is not None:
            blocks.append(block)
    return blocks


def _block(block: Any, at: str, ids: Ids, made_by: ProviderRaw) -> ContentBlock | None:
    kind = block.get("type")
    if kind == "text":
        return TextBlock(text=str(block.get("text", "")))
    if kind == "image":
        return ImageBlock(source=_image_source(block.get("source"), at))
    if kind == "document":
        return from_anthropic_document(block, at)
    if kind == "tool_use":
        tool_input = block.get("input") or {}
        if not isinstance(tool_input, dict):
            raise InvalidRequestError(f"{at}.input: expected an object")
        tool_id = ids(block.get("id"), f"{at}.id")
        return ToolUseBlock(id=tool_id, name=str(block.get("name", "")), input=tool_input)
    if kind == "tool_result":
        inner = block.get("content", "")
        parts = inner if isinstance(inner, str) else _blocks(inner, at, ids, made_by)
        content: str | list[ToolResultContent] = (
            parts
            if isinstance(parts, str)
            else [p for p in parts if isinstance(p, TextBlock | ImageBlock | DocumentBlock)]
        )
        return ToolResultBlock(
            tool_use_id=ids(block.get("tool_use_id"), f"{at}.tool_use_id"),
            content=content,
            is_error=bool(block.get("is_error", False)),
        )
    if kind == "thinking":
        thinking = str(block.get("thinking", ""))
        signature = block.get("signature")
        return ThinkingBlock(thinking=thinking, signature=signature, provider_raw=made_by)
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(data=str(block.get("data", "")), provider_raw=made_by)
    dropped(str(kind), at, "Anthropic Messages import")
    return None


def _image_source(source: Any, where: str) -> Base64ImageSource | URLImageSource:
    item = mapping(source, f"{where}.source")
    if item.get("type") == "base64":
        return Base64ImageSource(media_type=str(item.get("media_type")), data=str(item.get("data")))
    if item.get("type") == "url":
        return URLImageSource(url=str(item.get("url")))
    raise InvalidRequestError(f"{where}.source: expected a base64 or url image source")


def to_anthropic(messages: Iterable[Message]) -> dict[str, Any]:
    """``{"system": ..., "messages": [...]}`` in Messages API form from canonical messages
    (system text hoisted; tool results in user turns; consecutive same-role turns merged)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if message.role is Role.SYSTEM:
            system.append(message.text())
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        blocks = [_to_block(b, f"messages[{i}]") for b in message.content]
        content = [b for b in blocks if b is not None]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    body: dict[str, Any] = {"messages": out}
    if system:
        body["system"] = "\n\n".join(system)
    return body


def _to_block(block: ContentBlock | ToolResultContent, where: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "source": block.source.model_dump()}
    if isinstance(block, DocumentBlock | AudioBlock | VideoBlock):
        return to_anthropic_document(block, where)
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        content: Any = block.content
        if not isinstance(content, str):
            content = [p for part in content if (p := _to_block(part, where)) is not None]
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": content,
            **({"is_error": True} if block.is_error else {}),
        }
    if isinstance(block, ThinkingBlock) and block.signature:
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    dropped(block.type, where, "Anthropic Messages export")  # unsigned thinking
    return None
