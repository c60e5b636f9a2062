"""A content block as :class:`~metis.wire.builder.MessageBuilder` keeps it while it streams,
and the canonical content block it becomes when the message ends."""

from __future__ import annotations

from typing import Any

from metis.model.citation import Citation
from metis.model.content import (
    ContentBlock,
    ImageBlock,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind, StopReason
from metis.wire.json_limits import MAX_DEPTH, nested_deeper, too_deep
from metis.wire.partial_json import parse_object, parse_partial_object
from metis.wire.unicode_text import clean_value

TEXT, THINKING, REDACTED, TOOL = "text", "thinking", "redacted_thinking", "tool_use"
OPAQUE = "opaque"
WHOLE = "whole"  # a server tool's call or result, an image the model made: it arrives whole
"""The kinds of block."""


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
        "maybe_null",
        "name",
        "parts",
        "place",
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
        self.place: str | None = None  # and where in the provider's message it goes back
        self.maybe_null = True  # a call's arguments so far read as the start of JSON null
        self.doubtful = False
        """A tool call whose input may be unfinished: arguments that are not a JSON object,
        or none at all; whether it was cut off is known only when the reply stops."""
        self.citations: list[Citation] = []  # a text block's
        self.whole: ServerToolCallBlock | ServerToolResultBlock | ImageBlock | None = None

    def add_input(self, fragment: str) -> str:
        """Keep a fragment of a call's arguments; return what of them to give now. Arguments
        that so far read as the start of JSON null are held back (null is the call with no
        arguments, ``read_input``: no client must gather "null"), and given whole once they
        turn out otherwise."""
        self.parts.append(fragment)
        if not self.maybe_null:
            return fragment
        so_far = "".join(self.parts)
        if "null".startswith(so_far.lstrip()):
            return ""
        self.maybe_null = False
        return so_far

    def read_input(self, final_input: dict[str, Any] | None) -> None:
        """The call's input: the provider's own (``final_input``) or its arguments parsed;
        arguments that are not a JSON object are kept in ``unparsed``, what parsed of them
        is the input."""
        if final_input is not None:
            self.final_input = clean_value(final_input)
            self.doubtful = not final_input
            return
        raw = "".join(self.parts)
        # JSON null: how Groq writes a call of a tool that takes no arguments.
        parsed = {} if raw.strip() == "null" else parse_object(raw)
        # Nested too deep, it is kept raw: nothing downstream must recurse that far. A parsed
        # value's containers are walked (cheaper than scanning the text of a long input).
        if parsed is None:
            deep = too_deep(raw)
        else:
            deep = raw.count("{") + raw.count("[") > MAX_DEPTH and nested_deeper(parsed)
            parsed = None if deep else parsed
        if parsed is not None and ("\\u" in raw or not raw.isascii()):
            parsed = clean_value(parsed)
        if parsed is None:
            self.unparsed = raw
            parsed = {} if deep else clean_value(parse_partial_object(raw))
        self.final_input = parsed
        self.doubtful = self.unparsed is not None or not raw.strip()


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
            text, cited = "".join(block.parts), block.citations or None
            content.append(TextBlock(text=text, citations=cited, provider_raw=raw(data)))
        elif block.whole is not None:
            content.append(block.whole)
        elif block.kind == THINKING:
            content.append(
                ThinkingBlock(
                    thinking="".join(block.parts),
                    signature=block.signature,
                    provider_raw=raw(data) or origin,
                )
            )
        elif block.kind == OPAQUE:
            own: dict[str, Any] = {"item": block.item or {}}
            if block.place is not None:
                own["place"] = block.place
            item = ProviderRaw(provider=provider, model=model, data=own)
            content.append(OpaqueBlock(kind=block.name, provider_raw=item))
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


def unsaid(blocks: list[Block]) -> StopReason:
    """The stop of a message whole by its framing whose provider gave no stop reason (a null
    one): the tools it called are to be run, else the turn ended (docs/contract.md section 3);
    ``raw`` empty."""
    called = any(block.kind == TOOL for block in blocks)
    return StopReason(kind=StopKind.TOOL_USE if called else StopKind.END_TURN)
