"""The provider items a Responses reply's content blocks came from, kept on the blocks."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from metis.model.content import (
    ContentBlock,
    ProviderRaw,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.wire.builder import MessageBuilder

CANONICAL_ITEMS: dict[str, type[Any]] = {
    "message": TextBlock,
    "function_call": ToolUseBlock,
    "custom_tool_call": ToolUseBlock,  # a freeform call: its text as {"input": text}
    "reasoning": ThinkingBlock,
}
"""The output item types with a canonical form, and the block each becomes."""

SERVER_ITEMS = ("web_search_call", "code_interpreter_call")
"""The items a server tool's call and result come from (their blocks carry their item)."""


def with_items(
    content: list[ContentBlock],
    items: dict[int, tuple[str, dict[str, Any] | None]],
    dropped: Collection[Any],
    builder: MessageBuilder,
) -> list[ContentBlock]:
    """``content`` with each block's item in ``provider_raw.data``. Blocks follow the items
    that made them, in the order the items arrived (``items`` keeps it); if they do not line
    up, the content stays as it is."""
    order = list(items)
    made = [i for i in order if i not in dropped and builder.has_block(i)]
    own = [b for b in content if not isinstance(b, ServerToolCallBlock | ServerToolResultBlock)]
    if len(made) != len(own):
        return content
    kept = dict(zip(map(id, own), made, strict=True))
    out: list[ContentBlock] = []
    for block in content:
        index = kept.get(id(block))
        if index is None:  # a server tool's block: its item is already on it
            out.append(block)
            continue
        kind, raw = items[index]
        if not isinstance(block, CANONICAL_ITEMS[kind]):
            return content
        if raw is None:  # an item that never finished: nothing of it to send back
            out.append(block)
            continue
        data = {k: v for k, v in raw.items() if v is not None}
        if kind == "reasoning":
            after = order.index(index) + 1
            following = order[after] if after < len(order) else None
            led_to = items[following][0] if following is not None else None
            if (following not in made and led_to not in SERVER_ITEMS) or led_to == "reasoning":
                data["unpaired"] = True  # what it led to was not kept (or nothing was)
        old = block.provider_raw
        merged = ProviderRaw(
            provider=builder.provider,
            model=builder.model,
            data={**(old.data if old is not None else {}), **data},
        )
        out.append(block.model_copy(update={"provider_raw": merged}))
    return out
