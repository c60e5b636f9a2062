"""A conversation's history as a text-only endpoint takes it, whatever provider made it: an
assistant's ``tool_use`` blocks become tool-call tags in its text, a message's ``tool_result``
blocks become ``<tool_result>`` user text (images in a result stay image blocks in place, for a
model that can see them), and a user turn made that way is merged with a user turn next to it,
since chat templates want roles to alternate."""

from __future__ import annotations

from metis.model.content import (
    ContentBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.stages.policy.tool_shim.tags import RESULT_CLOSE, render_call, render_result_open


def uses_tools(messages: list[Message]) -> bool:
    """Whether any message holds a tool call or result (or is a tool turn)."""
    return any(
        message.role is Role.TOOL or isinstance(block, ToolUseBlock | ToolResultBlock)
        for message in messages
        for block in message.content
    )


def text_history(messages: list[Message]) -> list[Message]:
    """The history with tool calls and results written as text, in the preamble's syntax."""
    names = {
        block.id: block.name
        for message in messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }
    out: list[Message] = []
    merge_next = False  # the last message is a converted user turn
    for message in messages:
        converted = False
        if message.role is Role.ASSISTANT:
            if any(isinstance(b, ToolUseBlock) for b in message.content):
                message = message.model_copy(update={"content": _assistant_text(message.content)})
        elif message.role is Role.TOOL or any(
            isinstance(b, ToolResultBlock) for b in message.content
        ):
            content = _results_text(message.content, names)
            message = Message(role=Role.USER, content=content, id=message.id)
            converted = True
        user_after_user = out and message.role is Role.USER and out[-1].role is Role.USER
        if user_after_user and (converted or merge_next):
            out[-1] = _merged(out[-1], message)
            merge_next = True
            continue
        out.append(message)
        merge_next = converted
    return out


def _assistant_text(content: list[ContentBlock]) -> list[ContentBlock]:
    """An assistant turn's text and calls as one text block, its other blocks in place."""
    out: list[ContentBlock] = []
    parts: list[str] = []
    after_call = False
    for block in content:
        if isinstance(block, TextBlock):
            if after_call and block.text and not block.text[0].isspace():
                parts.append("\n")
            parts.append(block.text)
            after_call = False
        elif isinstance(block, ToolUseBlock):
            if parts and parts[-1] and not parts[-1].endswith("\n"):
                parts.append("\n")
            parts.append(render_call(block.name, block.input))
            after_call = True
        else:
            if parts:
                out.append(TextBlock(text="".join(parts)))
                parts = []
            out.append(block)
            after_call = False
    if parts:
        out.append(TextBlock(text="".join(parts)))
    return out


def _results_text(content: list[ContentBlock], names: dict[str, str]) -> list[ContentBlock]:
    """A turn's tool results (and anything else it holds) as user content."""
    out: list[ContentBlock] = []
    parts: list[str] = []

    def text(piece: str) -> None:
        if parts and not parts[-1].endswith("\n"):
            parts.append("\n")
        parts.append(piece)

    def flush() -> None:
        if parts:
            out.append(TextBlock(text="".join(parts)))
            parts.clear()

    for block in content:
        if isinstance(block, ToolResultBlock):
            text(render_result_open(block, names.get(block.tool_use_id)))
            if isinstance(block.content, str):
                parts.append(block.content)
            else:
                for part in block.content:
                    if isinstance(part, TextBlock):
                        parts.append(part.text)
                    else:  # an image: kept in place, for a model that can see it
                        flush()
                        out.append(part)
            parts.append(RESULT_CLOSE)
        elif isinstance(block, TextBlock):
            if parts:
                parts.append("\n")
            parts.append(block.text)
        else:
            flush()
            out.append(block)
    flush()
    return out


def _merged(first: Message, second: Message) -> Message:
    a, b = first.content, second.content
    if a and b and isinstance(a[-1], TextBlock) and isinstance(b[0], TextBlock):
        seam = TextBlock(text=f"{a[-1].text}\n\n{b[0].text}")
        content = [*a[:-1], seam, *b[1:]]
    else:
        content = [*a, *b]
    return first.model_copy(update={"content": content})
