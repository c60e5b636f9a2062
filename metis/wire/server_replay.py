"""Server-tool blocks in a history sent to a provider (docs/contract.md §11).

A server tool's call and result go back verbatim (``provider_raw``: encrypted contents and ids
included) only to the provider and model that made them. Anywhere else a result becomes text
that says what was called and what it returned, and its call is left out (the text holds its
input); a result with nothing readable (an encrypted or unknown payload) is left out with its
call, with the lossy-projection WARN.
"""

from __future__ import annotations

from metis.model.content import (
    ContentBlock,
    Message,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
)
from metis.model.history import history_of
from metis.model.server_tools import projected_text
from metis.wire.codec import EncodeContext


def has_server_blocks(content: list[ContentBlock]) -> bool:
    return any(isinstance(b, ServerToolCallBlock | ServerToolResultBlock) for b in content)


def for_provider(
    content: list[ContentBlock], call: EncodeContext, message_id: str
) -> list[ContentBlock]:
    """``content`` as this call's provider may take it: its own server-tool blocks kept, any
    other's projected to text or left out."""
    if not has_server_blocks(content):
        return content
    calls = {b.id: b for b in content if isinstance(b, ServerToolCallBlock)}
    answered = {b.tool_call_id for b in content if isinstance(b, ServerToolResultBlock)}
    out: list[ContentBlock] = []
    for n, block in enumerate(content):
        if not isinstance(block, ServerToolCallBlock | ServerToolResultBlock) or call.produced(
            block.provider_raw
        ):
            out.append(block)
        elif isinstance(block, ServerToolResultBlock):
            text = projected_text(block, calls.get(block.tool_call_id))
            if text is None:
                reason = f"{_origin(block)}; its {block.name} result holds nothing readable"
                call.warn_dropped(block.type, reason, message_id=message_id)
            else:  # a paragraph of its own where a wire joins the texts into one string
                more = any(isinstance(b, TextBlock) for b in content[n + 1 :])
                out.append(TextBlock(text=text + "\n\n" if more else text))
        elif block.id not in answered:
            reason = f"{_origin(block)}, and no result of it came with it"
            call.warn_dropped(block.type, reason, message_id=message_id)
    return out


def _origin(block: ServerToolCallBlock | ServerToolResultBlock) -> str:
    origin = block.provider_raw
    if origin is None:
        return "it was made by an unknown provider"
    return f"it was made by {origin.provider} ({origin.model})"


def messages_for_provider(messages: list[Message], call: EncodeContext) -> list[Message]:
    """Every message's content as :func:`for_provider` makes it (the same objects when no
    message holds a server tool's block)."""
    out = list(messages)
    for i in history_of(messages).server_tools_at:
        message = out[i]
        content = for_provider(message.content, call, message.id or f"messages[{i}]")
        out[i] = message.model_copy(update={"content": content})
    return out
