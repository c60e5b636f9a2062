"""What the request steps ask of one history message, read in one walk of its blocks.

Each step that looks for something in the history (media to fit, tool ids to map, images to
check, reasoning to filter, opaque blocks to leave out, cache hints) asks :func:`facts_of`
first and walks only the messages that hold it. The facts are read once per message object
and kept in a :class:`~metis.model.memo.MessageMemo`, so a conversation's next call reads only
its new messages. A block of a subclass counts as its base (``isinstance``).
"""

from __future__ import annotations

from dataclasses import dataclass

from metis.model.content import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    RedactedThinkingBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from metis.model.memo import MessageMemo

_FILES = (DocumentBlock, AudioBlock, VideoBlock)


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """``files``, ``images``: in its blocks or inside its tool results."""

    images: tuple[ImageBlock, ...]
    files: bool
    tool_ids: tuple[str, ...]
    """The ids its tool calls and results name, in order."""
    opaque: bool
    thinking: bool
    """A thinking or redacted thinking block."""
    server_tools: bool
    """A server tool's call or result block."""
    blank: bool
    """A text block with nothing but white space, or an error result with no output."""
    cache_hints: int
    """The cache hints on it and on its blocks."""

    @property
    def media(self) -> bool:
        return bool(self.images) or self.files


_FACTS: MessageMemo[MessageFacts] = MessageMemo()


def facts_of(message: Message) -> MessageFacts:
    """The facts of ``message``, read once per message object."""
    facts = _FACTS.get(message, None)
    return _FACTS.put(message, None, _read(message)) if facts is None else facts


def _read(message: Message) -> MessageFacts:
    images: list[ImageBlock] = []
    tool_ids: list[str] = []
    files = opaque = thinking = server = blank = False
    hints = int(message.cache is not None)
    for block in message.content:
        hints += block.cache is not None
        parts: list[object] = [block]
        if isinstance(block, ToolUseBlock):
            tool_ids.append(block.id)
        elif isinstance(block, ToolResultBlock):
            tool_ids.append(block.tool_use_id)
            blank = blank or _silent_error(block)
            if not isinstance(block.content, str):
                parts = [block, *block.content]
        elif isinstance(block, TextBlock):
            blank = blank or not block.text.strip()
        elif isinstance(block, OpaqueBlock):
            opaque = True
        elif isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            thinking = True
        elif isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
            server = True
        for part in parts:
            if isinstance(part, ImageBlock):
                images.append(part)
            elif isinstance(part, _FILES):
                files = True
    return MessageFacts(
        tuple(images), files, tuple(tool_ids), opaque, thinking, server, blank, hints
    )


def _silent_error(block: ToolResultBlock) -> bool:
    """An error result with no output: no text, no image."""
    if not block.is_error:
        return False
    if isinstance(block.content, str):
        return not block.content.strip()
    return all(isinstance(p, TextBlock) and not p.text.strip() for p in block.content)
