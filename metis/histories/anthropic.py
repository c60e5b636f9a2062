"""Stored histories in Anthropic Messages form (``messages`` and ``system``), in and out."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from metis.adapter.sendable import first_unsendable
from metis.errors import InvalidRequestError
from metis.histories.blocks import (
    ANTHROPIC,
    Export,
    anthropic_citations,
    from_anthropic_block,
    to_anthropic_text,
)
from metis.histories.files import from_anthropic_document, to_anthropic_document
from metis.histories.reading import (
    Ids,
    built,
    dropped,
    history,
    items,
    mapping,
    message,
    role_shown,
    shown,
    stored_history,
    text,
    tool_input,
)
from metis.model.cache import CacheHint
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    Role,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultContent,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.dicts import MessageDict
from metis.model.media import AudioBlock, DocumentBlock, FileIdSource, VideoBlock

_EXPORT = Export(ANTHROPIC, "Anthropic Messages export")


def from_anthropic(
    messages: Iterable[Any],
    *,
    system: Any = None,
    model: str | None = None,
    ids: Ids | None = None,
) -> list[Message]:
    """Canonical messages from a Messages API ``messages`` list (and its ``system``). Thinking
    blocks are marked as made by Anthropic's ``model``, so their signatures go back only there.
    ``ids`` maps the tool ids read to canonical ones (default: a new id for each)."""
    ids = Ids() if ids is None else ids
    made_by = ProviderRaw(provider="anthropic", model=model)
    out = [from_anthropic_system(system, ids, made_by)] if system else []
    for i, raw in enumerate(stored_history(messages)):
        out += from_anthropic_turn(raw, f"messages[{i}]", ids, made_by)
    return out


def from_anthropic_system(system: Any, ids: Ids, made_by: ProviderRaw) -> Message:
    """The canonical system message of a Messages API ``system`` (a text, or text blocks)."""
    return built(
        Message, "system", role=Role.SYSTEM, content=_blocks(system, "system", ids, made_by)
    )


def from_anthropic_turn(raw: Any, where: str, ids: Ids, made_by: ProviderRaw) -> list[Message]:
    """The canonical messages of one Messages API turn at ``where`` (two for a user turn with
    tool results and other blocks: the results are a tool turn of their own)."""
    role = mapping(raw, where).get("role")
    if role not in ("user", "assistant", "system"):
        raise InvalidRequestError(
            f"{where}.role: expected user, assistant or system, got {role_shown(role)}"
        )
    blocks = _blocks(raw.get("content"), where, ids, made_by, hinted=role != "system")
    if role == "system":  # the Messages API takes system turns among the others
        return [built(Message, where, role=Role.SYSTEM, content=blocks)]
    out: list[Message] = []
    results = [b for b in blocks if isinstance(b, ToolResultBlock)]
    rest = [b for b in blocks if not isinstance(b, ToolResultBlock)]
    if results:  # tool results ride in a user turn on the wire; a tool turn here
        out.append(Message(role=Role.TOOL, content=list(results)))
    if rest or not results:
        out.append(built(Message, where, role=Role(role), content=rest))
    return out


def _blocks(
    content: Any, where: str, ids: Ids, made_by: ProviderRaw, hinted: bool = False
) -> list[ContentBlock]:
    """``hinted``: a block's ``cache_control`` is read as its cache hint (a message's own
    blocks; a system prompt is one text, and a tool result's parts are not the message's)."""
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[ContentBlock] = []
    for j, raw in enumerate(items(content, f"{where}.content")):
        at = f"{where}.content[{j}]"
        block = _block(mapping(raw, at), at, ids, made_by)
        cacheable = hinted and str(raw.get("type")) in CACHEABLE
        marked = raw.get("cache_control") if cacheable else None
        if block is not None and marked is not None:
            block = block.model_copy(update={"cache": _hint(marked, f"{at}.cache_control")})
        if block is not None:
            blocks.append(block)
    return blocks


CACHEABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})
"""The blocks Anthropic takes a ``cache_control`` on (not thinking: it is cached with its turn)."""


def _hint(marked: Any, at: str) -> CacheHint:
    """A block's ``cache_control`` (``{"type": "ephemeral", "ttl": "5m" | "1h"}``) as the
    cache hint every provider stack writes in its own form (docs/caching.md)."""
    if not isinstance(marked, dict):
        raise InvalidRequestError(f"{at}: expected {{'type': 'ephemeral'}}, got {shown(marked)}")
    if marked.get("type") != "ephemeral":
        raise InvalidRequestError(
            f"{at}.type: expected ephemeral, got {_given(marked.get('type'))}"
        )
    ttl = marked.get("ttl")
    if ttl not in (None, "5m", "1h"):
        raise InvalidRequestError(f"{at}.ttl: expected 5m or 1h, got {_given(ttl)}")
    return CacheHint(ttl=ttl)


def _given(value: Any) -> str:
    return "nothing" if value is None else role_shown(value)


def _block(block: Any, at: str, ids: Ids, made_by: ProviderRaw) -> ContentBlock | None:
    kind = block.get("type")
    if kind == "text":
        return TextBlock(
            text=text(block, "text", at, None), citations=anthropic_citations(block, at)
        )
    if kind == "image":
        return ImageBlock(source=_source(block.get("source"), at))
    if kind == "document":
        return from_anthropic_document(block, at)
    if kind == "tool_use":
        return ToolUseBlock(
            id=ids(block.get("id"), f"{at}.id"),
            name=text(block, "name", at),
            input=tool_input(block.get("input"), f"{at}.input"),
        )
    if kind == "tool_result":
        return _result(block, at, ids, made_by)
    if kind == "thinking":
        thinking, signature = text(block, "thinking", at), block.get("signature")
        return built(
            ThinkingBlock, at, thinking=thinking, signature=signature, provider_raw=made_by
        )
    if kind == "redacted_thinking":
        return RedactedThinkingBlock(data=text(block, "data", at), provider_raw=made_by)
    return from_anthropic_block(block, kind, at, ids.servers, made_by.model)


def _result(block: Any, at: str, ids: Ids, made_by: ProviderRaw) -> ToolResultBlock:
    inner = block.get("content", "")
    parts = inner if isinstance(inner, str) else _blocks(inner, at, ids, made_by)
    content = (
        parts
        if isinstance(parts, str)
        else [p for p in parts if isinstance(p, TextBlock | ImageBlock | DocumentBlock)]
    )
    return ToolResultBlock(
        tool_use_id=ids(block.get("tool_use_id"), f"{at}.tool_use_id"),
        content=content,
        is_error=bool(block.get("is_error", False)),
    )


def _source(source: Any, where: str) -> Base64ImageSource | URLImageSource | FileIdSource:
    at = f"{where}.source"
    item = mapping(source, at)
    if item.get("type") == "base64":
        media_type, data = text(item, "media_type", at, None), text(item, "data", at, None)
        return Base64ImageSource(media_type=media_type, data=data)
    if item.get("type") == "url":
        return URLImageSource(url=text(item, "url", at, None))
    if item.get("type") == "file":  # an image the Files API holds
        return built(
            FileIdSource, at, file_id=text(item, "file_id", at, None), provider="anthropic"
        )
    raise InvalidRequestError(f"{at}: expected a base64, url or file image source")


def to_anthropic(messages: Iterable[Message | MessageDict]) -> dict[str, Any]:
    """``{"system": ..., "messages": [...]}`` in Messages API form from canonical messages (or
    their dicts): system text hoisted, tool results in user turns, consecutive same-role turns
    merged."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for i, value in enumerate(history(messages)):
        where = f"messages[{i}]"
        canonical = message(value, where)
        if canonical.role is Role.SYSTEM:
            system.append(canonical.text)
            continue
        role = "assistant" if canonical.role is Role.ASSISTANT else "user"
        own = _EXPORT.own(canonical.content, where)
        blocks = [_wire(b, f"{where}.content[{j}]") for j, b in enumerate(own)]
        content = [b for b in blocks if b is not None]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    body: dict[str, Any] = {"messages": out}
    if system:
        body["system"] = "\n\n".join(system)
    return body


def _wire(block: ContentBlock | ToolResultContent, where: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return to_anthropic_text(block, where)
    if isinstance(block, ServerToolCallBlock | ServerToolResultBlock):  # Anthropic's own
        return copy.deepcopy(block.provider_raw.data) if block.provider_raw else None
    if isinstance(block, OpaqueBlock):
        return copy.deepcopy(_EXPORT.opaque(block, where))
    if isinstance(block, ImageBlock):
        return _image(block, where)
    if isinstance(block, DocumentBlock | AudioBlock | VideoBlock):
        return to_anthropic_document(block, where)
    if isinstance(block, ToolUseBlock):
        problem = first_unsendable(block.input, f"{where}.input")
        if problem:
            raise InvalidRequestError(problem)
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        content: Any = (
            block.content
            if isinstance(block.content, str)
            else [p for part in block.content if (p := _wire(part, where)) is not None]
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
    dropped(block.type, where, "Anthropic Messages export")  # unsigned thinking
    return None


def _image(block: ImageBlock, where: str) -> dict[str, Any] | None:
    source = block.source
    if not isinstance(source, FileIdSource):
        return {"type": "image", "source": source.model_dump()}
    if source.provider != "anthropic":
        dropped("image", where, "Anthropic Messages export", f"a file id of {source.provider}")
        return None
    return {"type": "image", "source": {"type": "file", "file_id": source.file_id}}
