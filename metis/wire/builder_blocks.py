"""A block as the message builder keeps it while it arrives, and how a tool call's arguments
end: parsed, kept raw when they are not a JSON object, or marked incomplete when the reply
stopped before they were whole (docs/contract.md §2)."""

from __future__ import annotations

from typing import Any

from metis.model.citation import Citation
from metis.model.content import (
    ContentBlock,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.wire.json_limits import too_deep
from metis.wire.partial_json import parse_object, parse_partial_object
from metis.wire.unicode_text import clean_value

TEXT, THINKING, REDACTED, TOOL = "text", "thinking", "redacted_thinking", "tool_use"
OPAQUE = "opaque"
WHOLE = "whole"  # a block that arrives whole: a server tool's call or result

CUT_OFF = "the reply reached its output limit (max_tokens) before the arguments were complete"
ENDED = "the reply ended before the arguments were complete"
NOT_AN_OBJECT = "the arguments are not a JSON object"


class Block:
    __slots__ = (
        "citations",
        "doubtful",
        "ended",
        "final_input",
        "held",
        "index",
        "input_error",
        "item",
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
        self.item: dict[str, Any] | None = None  # an opaque block: the provider's own
        self.doubtful = False
        """A tool call whose input may be unfinished: arguments that are not a JSON object,
        or none at all; whether it was cut off is known only when the reply stops."""
        self.citations: list[Citation] = []
        self.whole: ServerToolCallBlock | ServerToolResultBlock | None = None

    def read_input(self, final_input: dict[str, Any] | None) -> None:
        """The call's input: the provider's own (``final_input``) or its arguments parsed;
        arguments that are not a JSON object are kept in ``unparsed``, what parsed of them
        is the input."""
        if final_input is not None:
            self.final_input = clean_value(final_input)
            self.doubtful = not final_input
            return
        raw = "".join(self.parts)
        deep = too_deep(raw)  # kept raw: nothing downstream must recurse that far
        parsed = None if deep else parse_object(raw)
        if parsed is not None and ("\\u" in raw or not raw.isascii()):
            parsed = clean_value(parsed)
        if parsed is None:
            self.unparsed = raw
            parsed = {} if deep else clean_value(parse_partial_object(raw))
        self.final_input = parsed
        self.doubtful = self.unparsed is not None or not raw.strip()

    def content(self, provider: str, model: str, kept: dict[str, Any] | None) -> ContentBlock:
        """The canonical block; ``kept`` the provider fields kept for it (``keep_raw``)."""
        origin = ProviderRaw(provider=provider, model=model, data=dict(kept or {}))
        mine = origin if kept is not None else None
        if self.kind == TEXT:
            text = "".join(self.parts)
            return TextBlock(text=text, citations=self.citations or None, provider_raw=mine)
        if self.whole is not None:
            return self.whole
        if self.kind == THINKING:
            thinking = "".join(self.parts)
            return ThinkingBlock(thinking=thinking, signature=self.signature, provider_raw=origin)
        if self.kind == REDACTED:
            return RedactedThinkingBlock(data="".join(self.parts), provider_raw=origin)
        if self.kind == OPAQUE:
            data = {"item": self.item or {}}
            raw = ProviderRaw(provider=provider, model=model, data=data)
            return OpaqueBlock(kind=self.name, provider_raw=raw)
        if self.unparsed is not None:
            kept = {**(kept or {}), "arguments": self.unparsed}
            mine = ProviderRaw(provider=provider, model=model, data=kept)
        return ToolUseBlock(
            id=self.tool_id,
            name=self.name,
            input=self.final_input or {},
            input_error=self.input_error,
            provider_raw=mine,
        )
