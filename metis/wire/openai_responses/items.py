"""The provider items a Responses reply's content blocks came from, kept on the blocks."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from metis.model.content import (
    ContentBlock,
    OpaqueBlock,
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
    whole = (OpaqueBlock, ServerToolCallBlock, ServerToolResultBlock)
    canonical = [block for block in content if not isinstance(block, whole)]
    if len(made) != len(canonical):
        return content
    by_block = dict(zip(map(id, canonical), made, strict=True))
    out: list[ContentBlock] = []
    for block in content:
        if isinstance(block, whole):  # the item itself (or a server tool's), kept whole
            out.append(block)
            continue
        index = by_block[id(block)]
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
            kept = following is not None and (following in made or following in dropped)
            if following is None or not kept or items[following][0] == "reasoning":
                data["unpaired"] = True  # what it led to was not kept (or nothing was)
        old = block.provider_raw
        merged = ProviderRaw(
            provider=builder.provider,
            model=builder.model,
            data={**(old.data if old is not None else {}), **data},
        )
        out.append(block.model_copy(update={"provider_raw": merged}))
    return out
