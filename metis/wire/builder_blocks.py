"""The builder's record of one block while a reply arrives, and the canonical block it ends as
(:mod:`metis.wire.builder`)."""

from __future__ import annotations

from typing import Any

from metis.model.citation import Citation
from metis.model.content import (
    ContentBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

TEXT, THINKING, REDACTED, TOOL, WHOLE = "text", "thinking", "redacted_thinking", "tool_use", "whole"


class BlockRecord:
    __slots__ = (
        "citations",
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
        "whole",
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
        self.citations: list[Citation] = []
        self.whole: ServerToolCallBlock | ServerToolResultBlock | None = None

    def block(self, kept: ProviderRaw | None, origin: ProviderRaw) -> ContentBlock:
        """The canonical block; ``kept`` holds the provider fields kept for it, ``origin``
        says who made the reply."""
        if self.kind == TEXT:
            return TextBlock(
                text="".join(self.parts), citations=self.citations or None, provider_raw=kept
            )
        if self.kind == THINKING:
            return ThinkingBlock(
                thinking="".join(self.parts), signature=self.signature, provider_raw=kept or origin
            )
        if self.kind == REDACTED:
            return RedactedThinkingBlock(data="".join(self.parts), provider_raw=kept or origin)
        if self.whole is not None:
            return self.whole
        if self.unparsed is not None:
            data = {**(kept.data if kept else {}), "arguments": self.unparsed}
            kept = ProviderRaw(provider=origin.provider, model=origin.model, data=data)
        return ToolUseBlock(
            id=self.tool_id,
            name=self.name,
            input=self.final_input or {},
            input_error=self.input_error,
            provider_raw=kept,
        )
