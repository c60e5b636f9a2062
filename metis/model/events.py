"""The canonical stream events (docs/contract.md §2).

Events are small slotted records, not pydantic models: one is made per delta on the hot path,
and validation happens where data enters (requests, config, the final content), not here.
They are plain mutable records so a stage may rewrite a field (a tool id, say) before it
passes the event outward; once an event has left the pipeline nothing changes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from metis.model.citation import Citation
from metis.model.content import ContentBlock, Message, TextBlock, ToolUseBlock
from metis.model.response import DroppedContent, StopReason, TokenUsage, reply_message
from metis.model.server_tools import ServerToolCallBlock, ServerToolResultBlock


class StreamEvent:
    """The base of the canonical stream events (docs/contract.md §2)."""

    __slots__ = ()
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"type": "text.delta", "content_block_index": 0, ...}``."""
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name == "final_content":
                value = [block.model_dump(mode="json", exclude_none=True) for block in value]
            elif f.name == "warnings":
                value = [warning.model_dump(mode="json") for warning in value]
            elif hasattr(value, "model_dump"):
                value = value.model_dump(mode="json")
            out[f.name] = value
        return out


@dataclass(slots=True)
class MessageStart(StreamEvent):
    """The first event of every call: the provider's ``message_id`` and ``model``, its own
    name for the model that answers (``gpt-4o-2024-08-06``), where the provider says them."""

    type: ClassVar[str] = "message.start"
    message_id: str | None = None
    model: str | None = None
    warnings: list[DroppedContent] = field(default_factory=list)
    """What the call left out before it was sent (the request as the provider takes it), set
    when the event leaves the adapter; ``message.complete`` lists these again with any later."""


@dataclass(slots=True)
class TextDelta(StreamEvent):
    """Text of the reply's block at ``content_block_index``, appended to what came before."""

    type: ClassVar[str] = "text.delta"
    content_block_index: int
    text: str


@dataclass(slots=True)
class ThinkingDelta(StreamEvent):
    """Reasoning text; the block's last delta carries its ``signature``. A redacted block
    arrives as one delta with ``redacted_data`` set and no text. ``provider_data``: with the
    signature, what its provider takes it back only with (an OpenAI reasoning item's ``id``),
    as the final block's ``provider_raw.data`` holds it too."""

    type: ClassVar[str] = "thinking.delta"
    content_block_index: int
    thinking: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    provider_data: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolUseStart(StreamEvent):
    """The model began a tool call: its canonical ``tool_use_id`` (``tu_<ulid>``) and the
    tool's name; its input follows as ``tool.use_input_delta`` fragments."""

    type: ClassVar[str] = "tool.use_start"
    content_block_index: int
    tool_use_id: str
    tool_name: str


@dataclass(slots=True)
class ToolUseInputDelta(StreamEvent):
    """``partial_json`` is the provider's fragment exactly as received (docs/contract.md §2)."""

    type: ClassVar[str] = "tool.use_input_delta"
    content_block_index: int
    tool_use_id: str
    partial_json: str


@dataclass(slots=True)
class ToolUseEnd(StreamEvent):
    """A tool call's input is whole: ``final_input`` is the JSON object its fragments make;
    when they make none, ``input_error`` says why (docs/contract.md §2)."""

    type: ClassVar[str] = "tool.use_end"
    content_block_index: int
    tool_use_id: str
    tool_name: str
    final_input: dict[str, Any]
    input_error: str | None = None
    """Set when the arguments were not a JSON object: see ``ToolUseBlock.input_error``."""


@dataclass(slots=True)
class CitationDelta(StreamEvent):
    """A source the text block at ``content_block_index`` cites; it is one of the block's
    ``citations`` in ``final_content``, in the order these events came."""

    type: ClassVar[str] = "text.citation"
    content_block_index: int
    citation: Citation


@dataclass(slots=True)
class ServerToolCall(StreamEvent):
    """A call the provider made and ran itself, whole (docs/contract.md §11): nothing for the
    application to run."""

    type: ClassVar[str] = "server_tool.call"
    content_block_index: int
    block: ServerToolCallBlock


@dataclass(slots=True)
class ServerToolResult(StreamEvent):
    """What a server tool call returned, whole (docs/contract.md §11)."""

    type: ClassVar[str] = "server_tool.result"
    content_block_index: int
    block: ServerToolResultBlock


@dataclass(slots=True)
class MessageComplete(StreamEvent):
    """The last event of every call: the whole reply (``final_content``), why it ended, the
    four token counts and the warnings; :class:`CanonicalResponse` is folded from it.
    ``model`` is the provider's own name, as in ``message.start``; price the usage with the
    canonical id the call named (``cost_of("openai:gpt-4o", event.usage)``), which is
    ``CanonicalResponse.model``."""

    type: ClassVar[str] = "message.complete"
    final_content: list[ContentBlock]
    stop_reason: StopReason
    usage: TokenUsage
    message_id: str | None = None
    model: str | None = None
    warnings: list[DroppedContent] = field(default_factory=list)
    """What the call left out, and why: set when the event leaves the adapter."""

    @property
    def text(self) -> str:
        """The reply's text blocks, joined, as :attr:`CanonicalResponse.text`."""
        return "".join(b.text for b in self.final_content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        """The tool calls the reply makes, in order; ``metis.run_tools(event, tools)`` runs
        them, as a folded reply's."""
        return [b for b in self.final_content if isinstance(b, ToolUseBlock)]

    @property
    def message(self) -> Message:
        """The reply as the next assistant message, as :attr:`CanonicalResponse.message`."""
        return reply_message(self.final_content, self.stop_reason)


BLOCK_EVENTS = (
    TextDelta,
    ThinkingDelta,
    ToolUseStart,
    ToolUseInputDelta,
    ToolUseEnd,
    CitationDelta,
    ServerToolCall,
    ServerToolResult,
)
