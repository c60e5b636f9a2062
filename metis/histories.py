"""Stored conversations in OpenAI Chat or Anthropic Messages request format, in and out.

For applications moving to metis with histories already on disk::

    messages = from_openai_chat(stored["messages"])
    messages = from_anthropic(stored["messages"], system=stored.get("system"),
                              model="claude-sonnet-4-5")
    stored = {"messages": to_openai_chat(messages)}
    body = to_anthropic(messages)                     # {"system": ..., "messages": [...]}

Provider tool ids become canonical ``tu_`` ids, the same id always the same one. What one side
cannot carry (audio parts, documents, server tools, reasoning in Chat format) is dropped whole
with the structured ``metis.lossy_projection`` WARN, never silently. Malformed input is an
InvalidRequestError naming where it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from metis.core.ids import new_tool_id
from metis.errors import InvalidRequestError
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
    ToolUseBlock,
    URLImageSource,
)

log = logging.getLogger("metis")


class _Ids:
    """Provider tool id -> canonical id, stable within one import."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def __call__(self, provider_id: Any, where: str) -> str:
        if not isinstance(provider_id, str) or not provider_id:
            raise InvalidRequestError(f"{where}: expected a tool call id (a non-empty string)")
        return self.known.setdefault(provider_id, new_tool_id())


def _dropped(what: str, where: str, fmt: str) -> None:
    log.warning(
        "dropped %s at %s: %s has no canonical form for it",
        what,
        where,
        fmt,
        extra={"event": "metis.lossy_projection", "block_type": what, "reason": where},
    )


def _mapping(item: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise InvalidRequestError(f"{where}: expected an object, got {type(item).__name__}")
    return item


def _items(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: expected a list, got {type(value).__name__}")
    return value


# OpenAI Chat Completions ------------------------------------------------------------------


def from_openai_chat(messages: Iterable[Any]) -> list[Message]:
    """Canonical messages from a Chat Completions ``messages`` list."""
    ids = _Ids()
    out: list[Message] = []
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        item = _mapping(raw, where)
        role = item.get("role")
        if role in ("system", "developer"):
            out.append(Message(role=Role.SYSTEM, content=_chat_parts(item.get("content"), where)))
        elif role == "user":
            out.append(Message(role=Role.USER, content=_chat_parts(item.get("content"), where)))
        elif role == "assistant":
            out.append(Message(role=Role.ASSISTANT, content=_chat_assistant(item, where, ids)))
        elif role == "tool":
            result = ToolResultBlock(
                tool_use_id=ids(item.get("tool_call_id"), f"{where}.tool_call_id"),
                content=_chat_text(item.get("content"), where),
            )
            if out and out[-1].role is Role.TOOL:  # parallel results: one canonical message
                out[-1] = Message(role=Role.TOOL, content=[*out[-1].content, result])
            else:
                out.append(Message(role=Role.TOOL, content=[result]))
        else:
            raise InvalidRequestError(
                f"{where}.role: expected system, developer, user, assistant or tool, got {role!r}"
            )
    return out


def _chat_parts(content: Any, where: str) -> list[ContentBlock]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[ContentBlock] = []
    for j, raw in enumerate(_items(content, f"{where}.content")):
        part = _mapping(raw, f"{where}.content[{j}]")
        kind = part.get("type")
        if kind == "text":
            blocks.append(TextBlock(text=str(part.get("text", ""))))
        elif kind == "image_url":
            url = _mapping(part.get("image_url"), f"{where}.content[{j}].image_url").get("url")
            blocks.append(ImageBlock(source=_image_source(url, f"{where}.content[{j}]")))
        else:
            _dropped(str(kind), f"{where}.content[{j}]", "OpenAI Chat import")
    return blocks


def _chat_text(content: Any, where: str) -> str:
    return "".join(b.text for b in _chat_parts(content, where) if isinstance(b, TextBlock))


def _chat_assistant(item: Mapping[str, Any], where: str, ids: _Ids) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    reasoning = item.get("reasoning_content") or item.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ThinkingBlock(thinking=reasoning))
    blocks.extend(_chat_parts(item.get("content"), where))
    for k, raw in enumerate(item.get("tool_calls") or []):
        at = f"{where}.tool_calls[{k}]"
        function = _mapping(_mapping(raw, at).get("function"), f"{at}.function")
        blocks.append(
            ToolUseBlock(
                id=ids(raw.get("id"), f"{at}.id"),
                name=str(function.get("name", "")),
                input=_arguments(function.get("arguments"), f"{at}.function.arguments"),
            )
        )
    return blocks


def _arguments(text: Any, where: str) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{where}: expected a JSON object, got {text!r:.80}") from None
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{where}: expected a JSON object, got {text!r:.80}")
    return value


def _image_source(url: Any, where: str) -> Base64ImageSource | URLImageSource:
    if not isinstance(url, str) or not url:
        raise InvalidRequestError(f"{where}: expected an image URL")
    if url.startswith("data:"):
        header, _, data = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if encoding != "base64" or not data:
            raise InvalidRequestError(f"{where}: expected a base64 data URL")
        return Base64ImageSource(media_type=media_type, data=data)
    return URLImageSource(url=url)


def to_openai_chat(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A Chat Completions ``messages`` list from canonical messages."""
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if message.role is Role.TOOL:
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    result = {"role": "tool", "tool_call_id": block.tool_use_id}
                    out.append({**result, "content": block.text()})
            continue
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append({"type": "text", "text": block.text})
            elif isinstance(block, ImageBlock):
                parts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
            elif isinstance(block, ToolUseBlock):
                arguments = json.dumps(block.input, ensure_ascii=False)
                calls.append(
                    {
                        "id": block.id,
                        "type": "function",
                        "function": {"name": block.name, "arguments": arguments},
                    }
                )
            else:
                _dropped(block.type, where, "OpenAI Chat export")
        entry: dict[str, Any] = {"role": message.role.value, "content": _chat_content(parts)}
        if calls:
            entry["tool_calls"] = calls
        out.append(entry)
    return out


def _chat_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    if not parts:
        return None
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _image_url(block: ImageBlock) -> str:
    source = block.source
    if isinstance(source, Base64ImageSource):
        return f"data:{source.media_type};base64,{source.data}"
    return source.url


# Anthropic Messages ------------------------------------------------------------------------


def from_anthropic(
    messages: Iterable[Any], *, system: Any = None, model: str | None = None
) -> list[Message]:
    """Canonical messages from a Messages API ``messages`` list (and its ``system``). Thinking
    blocks are marked as made by Anthropic's ``model``, so their signatures go back only there."""
    ids = _Ids()
    made_by = ProviderRaw(provider="anthropic", model=model)
    out: list[Message] = []
    if system:
        out.append(
            Message(role=Role.SYSTEM, content=_anthropic_blocks(system, "system", ids, made_by))
        )
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        item = _mapping(raw, where)
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise InvalidRequestError(f"{where}.role: expected user or assistant, got {role!r}")
        blocks = _anthropic_blocks(item.get("content"), where, ids, made_by)
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        rest = [b for b in blocks if not isinstance(b, ToolResultBlock)]
        if results:  # tool results ride in a user turn on the wire; a tool turn here
            out.append(Message(role=Role.TOOL, content=list(results)))
        if rest or not results:
            out.append(Message(role=Role(role), content=rest))
    return out


def _anthropic_blocks(
    content: Any, where: str, ids: _Ids, made_by: ProviderRaw
) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[ContentBlock] = []
    for j, raw in enumerate(_items(content, f"{where}.content")):
        at = f"{where}.content[{j}]"
        block = _mapping(raw, at)
        kind = block.get("type")
        if kind == "text":
            blocks.append(TextBlock(text=str(block.get("text", ""))))
        elif kind == "image":
            blocks.append(ImageBlock(source=_anthropic_source(block.get("source"), at)))
        elif kind == "tool_use":
            tool_input = block.get("input") or {}
            if not isinstance(tool_input, dict):
                raise InvalidRequestError(f"{at}.input: expected an object")
            blocks.append(
                ToolUseBlock(
                    id=ids(block.get("id"), f"{at}.id"),
                    name=str(block.get("name", "")),
                    input=tool_input,
                )
            )
        elif kind == "tool_result":
            inner = block.get("content", "")
            parts = inner if isinstance(inner, str) else _anthropic_blocks(inner, at, ids, made_by)
            blocks.append(
                ToolResultBlock(
                    tool_use_id=ids(block.get("tool_use_id"), f"{at}.tool_use_id"),
                    content=parts
                    if isinstance(parts, str)
                    else [p for p in parts if isinstance(p, TextBlock | ImageBlock)],
                    is_error=bool(block.get("is_error", False)),
                )
            )
        elif kind == "thinking":
            blocks.append(
                ThinkingBlock(
                    thinking=str(block.get("thinking", "")),
                    signature=block.get("signature"),
                    provider_raw=made_by,
                )
            )
        elif kind == "redacted_thinking":
            blocks.append(
                RedactedThinkingBlock(data=str(block.get("data", "")), provider_raw=made_by)
            )
        else:
            _dropped(str(kind), at, "Anthropic Messages import")
    return blocks


def _anthropic_source(source: Any, where: str) -> Base64ImageSource | URLImageSource:
    item = _mapping(source, f"{where}.source")
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
        blocks = [_anthropic_block(b, f"messages[{i}]") for b in message.content]
        content = [b for b in blocks if b is not None]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    body: dict[str, Any] = {"messages": out}
    if system:
        body["system"] = "\n\n".join(system)
    return body


def _anthropic_block(block: ContentBlock, where: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "source": block.source.model_dump()}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        content: Any = (
            block.content
            if isinstance(block.content, str)
            else [_anthropic_block(part, where) for part in block.content]
        )
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
    _dropped(block.type, where, "Anthropic Messages export")  # unsigned thinking
    return None
