"""What a model sees and says, whatever the wire format: every format reads its request into a
:class:`Prompt` and renders its answer from a :class:`Reply`. A model is any callable from
a Prompt to a Reply (:data:`Model`): the scripted model (:mod:`.responder`), a script, or a
function a test writes (:mod:`.script`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from metis.testing.emulator.wire import count_tokens

StopKind = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"]
STOP_KINDS: tuple[str, ...] = get_args(StopKind)
# Claude Code wraps its own context in these; they are not the user's words.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CallIn:
    id: str
    name: str
    args: Any = None


@dataclass(slots=True)
class ResultIn:
    call_id: str
    content: str
    name: str | None = None
    is_error: bool = False


@dataclass(slots=True)
class Turn:
    role: Literal["user", "assistant"]
    text: str = ""
    calls: list[CallIn] = field(default_factory=list)
    results: list[ResultIn] = field(default_factory=list)


@dataclass(slots=True)
class Prompt:
    """A request, provider-neutral. ``segments`` are the request's parts in prompt order
    (tools and system first, then one per message) for token counting and prefix caching;
    ``breakpoints`` the segment indexes that carry an explicit cache marker (Anthropic,
    Bedrock), ``segment_blocks`` how many content blocks each segment has (for the lookback).
    ``provider`` names the format that read it; ``items`` are the conversation in its wire
    form, as the provider rebuilt it (Responses: the stored items it continues, then its
    input)."""

    model: str
    turns: list[Turn]
    system: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str = "auto"  # auto | none | required | tool:<name>
    parallel: bool = True
    thinking: bool = False
    max_tokens: int | None = None
    stop_sequences: list[str] = field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    json_mode: bool = False
    segments: list[str] = field(default_factory=list)
    breakpoints: list[int] | None = None
    segment_blocks: list[int] | None = None
    provider: str = ""
    items: list[Any] = field(default_factory=list)

    def compaction_start(self) -> int | None:
        """The item the model reads the conversation from: the latest compaction block's (a
        message holding one, or a compaction item), as the APIs read a compacted conversation
        (what precedes it is dropped); None when there is none."""
        start = None
        for i, item in enumerate(self.items or []):
            content = item.get("content") if isinstance(item, dict) else None
            blocks = content if isinstance(content, list) else [item]
            if any(isinstance(b, dict) and b.get("type") == "compaction" for b in blocks):
                start = i
        return start

    def read_segments(self) -> list[str]:
        """The segments the model reads: the tools and system, then the conversation from
        :meth:`compaction_start` on."""
        start = self.compaction_start()
        if start is None:
            return self.segments
        return self.segments[:1] + self.segments[1 + start :]

    @property
    def tokens(self) -> int:
        """The input tokens it counts for (at least one), from :meth:`read_segments`: what
        usage reports and the token counting endpoints answer."""
        return sum(count_tokens(s) for s in self.read_segments()) or 1

    @property
    def user_text(self) -> str:
        """The last thing the user wrote, without ``<system-reminder>`` blocks."""
        for turn in reversed(self.turns):
            text = _REMINDER.sub("", turn.text).strip() if turn.role == "user" else ""
            if text:
                return text
        return ""


@dataclass(slots=True)
class CallOut:
    name: str
    args: dict[str, Any]

    @property
    def arguments(self) -> str:
        return json.dumps(self.args, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0  # all input, cached or not
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0  # all output, thinking included
    thinking_tokens: int = 0

    @property
    def uncached_input(self) -> int:
        return max(0, self.input_tokens - self.cache_read - self.cache_write)


@dataclass(slots=True)
class Reply:
    thinking: str = ""
    text: str = ""
    calls: list[CallOut] = field(default_factory=list)
    stop: StopKind = "end_turn"
    stop_sequence: str | None = None
    """The stop sequence that ended the text (the text cut before it), when one did."""
    category: str | None = None
    """A refusal's policy category (``stop="refusal"``): Anthropic's ``stop_details``."""
    explanation: str | None = None
    """A refusal's explanation (``stop="refusal"``): Anthropic's ``stop_details``, OpenAI's
    ``refusal``."""
    usage: Usage = field(default_factory=Usage)
    server: list[Any] = field(default_factory=list)
    """Server tools the reply ran, before its text (:mod:`.server_tools`)."""
    cite: bool = False
    """The text cites every web search result, and each document of the request that asks
    for citations (Anthropic, Bedrock)."""

    def __post_init__(self) -> None:
        if self.stop not in STOP_KINDS:  # said when scripted, not as a KeyError when rendered
            raise ValueError(f"Reply stop {self.stop!r} is not one of {', '.join(STOP_KINDS)}")


Model = Callable[[Prompt], Reply]


def measured(prompt: Prompt, reply: Reply) -> Reply:
    """``reply`` with its usage counted (a quarter of the characters), cut before the first of
    the prompt's stop sequences its text holds (its calls dropped, its stop ``stop_sequence``),
    and at the prompt's ``max_tokens`` (likewise, its stop ``max_tokens``) when it does not
    fit."""
    _stop_at_sequence(prompt, reply)
    usage = reply.usage
    usage.input_tokens = prompt.tokens
    usage.thinking_tokens = count_tokens(reply.thinking)
    visible = count_tokens(reply.text) + sum(count_tokens(c.arguments) + 5 for c in reply.calls)
    limit = prompt.max_tokens
    if limit is not None and usage.thinking_tokens + visible > limit:
        room = max(0, limit - usage.thinking_tokens)
        reply.calls = []
        reply.text = reply.text[: room * 4].rstrip()
        reply.stop = "max_tokens"
        visible = min(room, count_tokens(reply.text))
    elif reply.calls and reply.stop == "end_turn":
        reply.stop = "tool_use"
    usage.output_tokens = max(1, usage.thinking_tokens + visible)
    return reply


def _stop_at_sequence(prompt: Prompt, reply: Reply) -> None:
    """A model writing the text stops once what it wrote ends with a stop sequence: the one
    whose first occurrence ends first (of two ending there, the longer)."""
    text = reply.text
    found = [(text.find(s) + len(s), -len(s), s) for s in prompt.stop_sequences if s and s in text]
    if found:
        end, _, sequence = min(found)
        at = end - len(sequence)
        reply.text, reply.calls = reply.text[:at], []
        reply.stop, reply.stop_sequence = "stop_sequence", sequence
