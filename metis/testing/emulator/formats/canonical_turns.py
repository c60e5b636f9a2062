"""A request as the emulator's model reads it, from what the gateway's server-side codecs read
(metis.gateway): one reader of each API's requests."""

from __future__ import annotations

from typing import Any, Literal

from metis.errors import InvalidRequestError
from metis.gateway.errors import THREAD_UNSUPPORTED, ThreadUnsupportedError
from metis.gateway.inbound import Inbound
from metis.model.content import Message, Role, TextBlock, ToolResultBlock, ToolUseBlock
from metis.model.request import ToolChoice
from metis.testing.emulator.model import CallIn, Prompt, ResultIn, ToolSpec, Turn
from metis.testing.emulator.rules import Refused

CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def read_by(reader: Any, body: Any) -> Any:
    """``reader(body)`` (a gateway codec's reader), its refusal a plain 400 (an Anthropic
    ``thread`` the emulator does not hold: with the code Anthropic gives a request it will not
    thread, on which the SDK's tool runner sends the whole conversation)."""
    try:
        return reader(body)
    except InvalidRequestError as refused:
        code = THREAD_UNSUPPORTED if isinstance(refused, ThreadUnsupportedError) else None
        raise Refused(refused.message, code=code) from None


def prompt_of(inbound: Inbound, model: str, **wire: Any) -> Prompt:
    """The Prompt of a request the gateway read: its turns, system texts, function tools, tool
    choice (a freeform tool's name is never called: auto), parallel calls, output limit and
    schema. ``wire`` sets what the format reads from the body itself."""
    fields = inbound.fields
    tools = fields.get("tools") or []
    choice: ToolChoice = fields.get("tool_choice") or ToolChoice.auto()
    freeform = {tool.name for tool in tools if tool.freeform is not None}
    turns, system = turns_of(inbound.messages)
    read: dict[str, Any] = {
        "model": model,
        "turns": turns,
        "system": "\n".join(t for t in [fields.get("system_prompt"), *system] if t),
        "tools": [
            ToolSpec(tool.name, tool.description or "", tool.input_schema)
            for tool in tools
            if tool.freeform is None
        ],
        "tool_choice": "auto"
        if choice.name in freeform
        else f"tool:{choice.name}"
        if choice.type == "tool"
        else CHOICES[choice.type],
        "parallel": fields.get("parallel_tool_calls", True),
        "max_tokens": inbound.max_output_tokens,
        "stop_sequences": list(fields.get("stop_sequences") or ()),
        "output_schema": fields.get("output_schema"),
    }
    return Prompt(**{**read, **wire})


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
                ResultIn(b.tool_use_id, b.text, None, b.is_error)
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
