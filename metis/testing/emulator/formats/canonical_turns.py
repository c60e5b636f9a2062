"""A request's conversation as the emulator's model reads it, from the canonical messages the
gateway's server-side codecs read (metis.gateway): one reader of each API's requests."""

from __future__ import annotations

from typing import Literal

from metis.model.content import Message, Role, TextBlock, ToolResultBlock, ToolUseBlock
from metis.testing.emulator.model import CallIn, ResultIn, Turn


def turns_of(messages: list[Message]) -> tuple[list[Turn], list[str]]:
    """The turns, and the system texts in order. Tool results and the user's words after
    them are one user turn, as they are on the wire."""
    turns: list[Turn] = []
    system: list[str] = []
    for message in messages:
        text = "\n".join(b.text for b in message.content if isinstance(b, TextBlock))
        last = turns[-1] if turns else None
        if message.role is Role.SYSTEM:
            system.append(text)
        elif message.role is Role.TOOL:
            results = [
                ResultIn(b.tool_use_id, b.text(), None, b.is_error)
                for b in message.content
                if isinstance(b, ToolResultBlock)
            ]
            turns.append(Turn(role="user", results=results))
        elif message.role is Role.USER and last and last.results and not last.text:
            last.text = text
        else:
            role: Literal["user", "assistant"] = (
                "assistant" if message.role is Role.ASSISTANT else "user"
            )
            calls = [
                CallIn(b.id, b.name, b.input)
                for b in message.content
                if isinstance(b, ToolUseBlock)
            ]
            turns.append(Turn(role=role, text=text, calls=calls))
    return turns, system
