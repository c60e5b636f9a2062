"""What a tool call is answered with: a tool's value as a result's content, or an ``is_error``
result saying why there is none (an unknown tool, an input that is not whole, arguments that do
not validate, an exception, a value that cannot be made text), never an exception."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Collection
from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError

from metis.model.content import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    ToolResultContent,
    ToolUseBlock,
    VideoBlock,
)
from metis.wire.unicode_text import clean

log = logging.getLogger("metis")


class ToolError(Exception):
    """Raised by a tool to tell the model why it has no answer ("no city named 'Pariss'"):
    the message, as written, is the ``is_error`` result the model reads, and it is logged at
    DEBUG only. Any other exception a tool raises is a WARN with its traceback."""


def unrunnable(call: ToolUseBlock, tools: Collection[str]) -> ToolResultBlock:
    """An unknown tool, or an input that is not whole (arguments that were not a JSON object, a
    call cut off by the output limit): answered with why, never run."""
    if call.name not in tools:
        known = ", ".join(sorted(tools)) or "none"
        text = f"no tool named {call.name!r}; the tools are: {known}"
    else:
        text = f"{call.name} was not run: {call.input_error}"
    return ToolResultBlock(tool_use_id=call.id, content=text, is_error=True)


def timed_out(call: ToolUseBlock, timeout_seconds: float) -> ToolResultBlock:
    """A call still running ``timeout_seconds`` after it started."""
    text = f"{call.name} did not finish within {timeout_seconds:g} s"
    return ToolResultBlock(tool_use_id=call.id, content=text, is_error=True)


def failed(call: ToolUseBlock, exc: Exception) -> ToolResultBlock:
    """The model is told why; a tool that raised is logged too, with its traceback (a WARN:
    the application's bug would otherwise show only in the model's words)."""
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
        )
        text = f"the arguments of {call.name} are not valid: {problems}"
    else:
        said = isinstance(exc, ToolError)  # the tool's own answer, not a fault of the tool
        text = described(exc).removeprefix(f"{type(exc).__name__}: ") if said else described(exc)
        log.log(
            logging.DEBUG if said else logging.WARNING,
            "tool %r raised %s; the model is told, in an is_error result\n%s",
            call.name,
            clean(text),
            "" if said else _where(exc),
            extra={"event": "metis.tool_failed", "tool": call.name, "tool_use_id": call.id},
        )
    return ToolResultBlock(tool_use_id=call.id, content=clean(text), is_error=True)


def _where(exc: BaseException) -> str:
    """Where ``exc`` was raised, frame by frame, as clean text: no source lines (reading the
    files takes the time a tool's timeout is counting) and no lone surrogate (which fails a
    log handler writing UTF-8)."""
    frames = traceback.StackSummary.extract(
        traceback.walk_tb(exc.__traceback__), lookup_lines=False
    )
    where = "".join(f'  File "{f.filename}", line {f.lineno}, in {f.name}\n' for f in frames)
    return clean(f"Traceback (most recent call last):\n{where}{described(exc)}")


_MEDIA = (ImageBlock, DocumentBlock, AudioBlock, VideoBlock)


def result_of(call: ToolUseBlock, value: Any) -> ToolResultBlock:
    blocks = _blocks(value)
    if blocks is not None:
        return ToolResultBlock(tool_use_id=call.id, content=blocks)
    try:
        text = _text(value)
    except Exception as exc:  # circular, not UTF-8, too deep, a str() that raises, ...
        reason = f"the result of {call.name} could not be made text ({described(exc)})"
        return ToolResultBlock(tool_use_id=call.id, content=clean(reason), is_error=True)
    return ToolResultBlock(tool_use_id=call.id, content=text)


def _blocks(value: Any) -> list[ToolResultContent] | None:
    """A result holding content blocks (a text or media block alone, or in a list of blocks
    and strings) as the result's content; None for any other result, which is made text."""
    items = value if isinstance(value, list | tuple) else [value]
    if not any(isinstance(item, (TextBlock, *_MEDIA)) for item in items):
        return None
    if not all(isinstance(item, (str, TextBlock, *_MEDIA)) for item in items):
        return None
    return [TextBlock(text=clean(item)) if isinstance(item, str) else item for item in items]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return pydantic_core.to_json(value, fallback=str).decode()


def described(exc: BaseException) -> str:
    """``Type: message`` for an exception, even one whose ``str()`` fails."""
    try:
        message = str(exc)
    except Exception:
        message = "<its message could not be printed>"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
