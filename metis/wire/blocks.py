"""A content block as :class:`~metis.wire.builder.MessageBuilder` keeps it while it streams,
and the canonical content block it becomes when the message ends."""

from __future__ import annotations

from typing import Any

from metis.model.content import (
    ContentBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

TEXT, THINKING, REDACTED, TOOL = "text", "thinking", "redacted_thinking", "tool_use"
"""The kinds of block."""


class Block:
    __slots__ = (
        "ended",
        "final_input",
        "held",
        "index",
        "input_error",
        "kind",
        "name",
        "parts",
        "signature",
        "tool_id",
        "unparsed",
    )

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.parts: list[str] = []
        self.signature: str | None = None
        self.tool_id = ""
        self.name = ""
        self.ended = False
        self.held = ""  # a high surrogate ending the last fragment, waiting for its low half
        self.final_input: dict[str, Any] | None = None
        self.unparsed: str | None = None
        self.input_error: str | None = None


def final_content(
    blocks: list[Block], kept: dict[int, dict[str, Any]], provider: str, model: str
) -> list[ContentBlock]:
    """The canonical content of ``blocks``, each with the provider fields kept for it (by
    canonical index) in ``provider_raw``; thinking is marked as ``provider``'s and
    ``model``'s even when nothing was kept for it."""
    origin = ProviderRaw(provider=provider, model=model)

    def raw(data: dict[str, Any] | None) -> ProviderRaw | None:
        return (
            None if data is None else ProviderRaw(provider=provider, model=model, data=dict(data))
        )

    content: list[ContentBlock] = []
    for block in blocks:
        data = kept.get(block.index)
        if block.kind == TEXT:
            content.append(TextBlock(text="".join(block.parts), provider_raw=raw(data)))
        elif block.kind == THINKING:
            content.append(
                ThinkingBlock(
                    thinking="".join(block.parts),
                    signature=block.signature,
                    provider_raw=raw(data) or origin,
                )
            )
        elif block.kind == REDACTED:
            content.append(
                RedactedThinkingBlock(data="".join(block.parts), provider_raw=raw(data) or origin)
            )
        else:
            if block.unparsed is not None:
                data = {**(data or {}), "arguments": block.unparsed}
            content.append(
                ToolUseBlock(
                    id=block.tool_id,
                    name=block.name,
                    input=block.final_input or {},
                    input_error=block.input_error,
                    provider_raw=raw(data),
                )
            )
    return content
