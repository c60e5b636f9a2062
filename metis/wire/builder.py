"""Turning a provider's blocks into canonical events, and the events into the final message.

Every codec's parser drives one ``MessageBuilder`` per call: it names provider blocks by a key
of its own (Anthropic's block index, OpenAI's tool-call index) and the builder assigns the
canonical ``content_block_index``, keeps every stream invariant of docs/contract.md §2, and at the
end assembles ``final_content`` from what it kept. Text is kept as a list of fragments and
joined once, so cost grows linearly with the stream.

Events are appended to ``builder.out``; the normalize stage drains that list after each
provider object, so the hot path makes one small object per event and no per-chunk lists.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from metis.catalog.estimate import CHARS_PER_TOKEN
from metis.model.content import (
    ContentBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.wire.json_limits import too_deep
from metis.wire.partial_json import parse_object, parse_partial_object
from metis.wire.read import token_count
from metis.wire.unicode_text import REPLACEMENT, clean, clean_value, joined

_TEXT, _THINKING, _REDACTED, _TOOL = "text", "thinking", "redacted_thinking", "tool_use"
_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_tokens",
)

Warn = Callable[..., None]


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


class _Block:
    __slots__ = (
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


class MessageBuilder:
    def __init__(self, provider: str, model: str, warn: Warn = _ignore) -> None:
        self.provider = provider
        self.model = model
        self.warn = warn
        self.out: list[StreamEvent] = []
        self.started = False
        self.completed = False
        self.message_id: str | None = None
        self.reported_model: str | None = None
        self.stop_reason: StopReason | None = None
        self.usage_reported = False
        self.usage_estimated = False
        self.estimate_usage: Callable[[MessageBuilder], None] | None = None
        """Called at ``finish`` when the provider reported no usage at all."""
        self.invalid_arguments: Callable[[str, str, str], None] | None = None
        """Called with a tool's name, id and argument text when a finished tool call's
        arguments are not a JSON object (the call is kept, marked); without it, ``warn``."""
        self.output_count_pending = False
        """The output count reported so far is a placeholder (Anthropic's ``message_start``
        says 1); if the message ends before the real count, it is estimated from what arrived."""
        self._usage = [0, 0, 0, 0, 0]
        self._blocks: list[_Block] = []
        self._by_key: dict[Hashable, _Block] = {}
        self._open_tool: _Block | None = None
        self._raw: dict[int, dict[str, Any]] = {}

    # Message level -----------------------------------------------------------------------

    def start(self, message_id: str | None = None, model: str | None = None) -> None:
        if self.started:
            self.message_id = self.message_id or message_id
            self.reported_model = self.reported_model or model
            return
        self.started = True
        self.message_id = message_id = clean(message_id) if message_id else message_id
        self.reported_model = model = clean(model) if model else model
        self.out.append(MessageStart(message_id, model))

    def usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cached_input_tokens: int | None = None,
        cache_creation_input_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> None:
        """Record counts the provider reported; ``None`` leaves a count as it was. A count
        that is not a whole number from 0 to ``MAX_TOKEN_COUNT`` is a ProtocolError.
        ``reasoning_tokens`` is the part of ``output_tokens`` spent reasoning."""
        counts = (input_tokens, output_tokens, cached_input_tokens, cache_creation_input_tokens)
        for i, value in enumerate((*counts, reasoning_tokens)):
            if value is not None:
                self._usage[i] = token_count(value, _USAGE_FIELDS[i], self.provider)
                self.usage_reported = True

    def stop(self, reason: StopReason) -> None:
        """Note why the message stopped; ``finish`` ends it (providers send usage after)."""
        self.stop_reason = _clean_stop(reason)

    def finish(self, reason: StopReason | None = None) -> None:
        """End the message: close any tool still open, then ``message.complete``."""
        if self.completed:
            return
        self.start()
        stop = _clean_stop(reason) or self.stop_reason or StopReason(kind=StopKind.END_TURN)
        for block in self._blocks:
            if block.held:
                self._flush(block)
        if self._open_tool is not None:
            # A cut-off stream leaves arguments truncated: expected, so no WARN for them.
            self._end_tool(self._open_tool, None, partial=_abrupt(stop))
        if not self.usage_reported and self.estimate_usage is not None:
            self.estimate_usage(self)
        if self.output_count_pending:
            self._usage[1] = int(sum(map(len, self.output_text())) / CHARS_PER_TOKEN)
            self.usage_estimated = True
        self.completed = True
        self.out.append(
            MessageComplete(
                self.final_content(), stop, self.token_usage(), self.message_id, self.reported_model
            )
        )

    def token_usage(self) -> TokenUsage:
        i, o, cached, created, reasoning = self._usage
        return TokenUsage(
            input_tokens=i,
            output_tokens=max(o, reasoning),
            cached_input_tokens=cached,
            cache_creation_input_tokens=created,
            reasoning_tokens=reasoning,
            estimated=self.usage_estimated,
        )

    def output_text(self) -> list[str]:
        """Every fragment of text, reasoning and tool input received so far."""
        return [part for block in self._blocks for part in block.parts]

    # Blocks ------------------------------------------------------------------------------

    def text(self, key: Hashable, text: str) -> None:
        block = self._by_key.get(key)
        if block is None or block.kind != _TEXT or block.index != len(self._blocks) - 1:
            block = self._open(key, _TEXT)
        if block.held or not text.isascii():
            text = self._unicode(block, text)
            if not text:
                return
        block.parts.append(text)
        self.out.append(TextDelta(block.index, text))

    def thinking(self, key: Hashable, text: str) -> None:
        block = self._thinking_block(key)
        if block.held or not text.isascii():
            text = self._unicode(block, text)
            if not text:
                return
        block.parts.append(text)
        self.out.append(ThinkingDelta(block.index, text))

    def thinking_signature(self, key: Hashable, signature: str) -> None:
        block = self._thinking_block(key)
        signature = clean(signature)
        block.signature = (block.signature or "") + signature
        self.out.append(ThinkingDelta(block.index, "", signature=signature))

    def redacted_thinking(self, key: Hashable, data: str) -> None:
        block = self._open(key, _REDACTED)
        data = clean(data)
        block.parts.append(data)
        self.out.append(ThinkingDelta(block.index, "", redacted_data=data))

    def tool_start(self, key: Hashable, tool_id: str, name: str) -> None:
        block = self._open(key, _TOOL)
        block.tool_id = tool_id = clean(tool_id)
        block.name = name = clean(name)
        self._open_tool = block
        self.out.append(ToolUseStart(block.index, tool_id, name))

    def tool_input(self, key: Hashable, fragment: str) -> None:
        block = self._by_key.get(key)
        if block is None or block.kind != _TOOL:
            self.warn("tool_use", f"input fragment for unknown tool block {key!r}")
            return
        if block.ended:
            self.warn("tool_use", f"input fragment after tool {block.tool_id!r} ended")
            return
        if block.held or not fragment.isascii():
            fragment = self._unicode(block, fragment)
        block.parts.append(fragment)
        if fragment:
            self.out.append(ToolUseInputDelta(block.index, block.tool_id, fragment))

    def tool_end(self, key: Hashable, final_input: dict[str, Any] | None = None) -> None:
        """End a tool; ``final_input`` is the provider's authoritative input, when it has one."""
        block = self._by_key.get(key)
        if block is not None and block.kind == _TOOL and not block.ended:
            self._end_tool(block, final_input, partial=False)

    def close(self, key: Hashable) -> None:
        """The provider closed a block: for a tool that is its end, otherwise nothing."""
        block = self._by_key.get(key)
        if block is not None and block.kind == _TOOL and not block.ended:
            self._end_tool(block, None, partial=False)

    def has_block(self, key: Hashable) -> bool:
        return key in self._by_key

    def index_of(self, key: Hashable) -> int | None:
        """The canonical index of the latest block opened under ``key``, if any."""
        block = self._by_key.get(key)
        return None if block is None else block.index

    def keep_raw(self, index: int, data: dict[str, Any]) -> None:
        """Keep provider fields (a thought signature) for the block at canonical ``index``:
        they go into its ``provider_raw.data``, however the message ends (complete, error,
        cancel). Kept even when empty: the block is then marked as this provider's own."""
        self._raw.setdefault(index, {}).update(clean_value(data))

    def has_raw(self, index: int) -> bool:
        return index in self._raw

    # Internals ---------------------------------------------------------------------------

    def _thinking_block(self, key: Hashable) -> _Block:
        block = self._by_key.get(key)
        if block is None or block.kind != _THINKING or block.index != len(self._blocks) - 1:
            block = self._open(key, _THINKING)
        return block

    def _unicode(self, block: _Block, text: str) -> str:
        """``text`` after the surrogate ``block`` held; holds a new trailing one."""
        text, block.held = joined(block.held, text)
        return text

    def _flush(self, block: _Block) -> None:
        """A held high surrogate whose low half never came: it becomes U+FFFD."""
        block.held = ""
        block.parts.append(REPLACEMENT)
        if block.kind == _TEXT:
            self.out.append(TextDelta(block.index, REPLACEMENT))
        elif block.kind == _THINKING:
            self.out.append(ThinkingDelta(block.index, REPLACEMENT))
        else:
            self.out.append(ToolUseInputDelta(block.index, block.tool_id, REPLACEMENT))

    def _open(self, key: Hashable, kind: str) -> _Block:
        if not self.started:
            self.start()
        if self._blocks and self._blocks[-1].held:
            self._flush(self._blocks[-1])
        if self._open_tool is not None:
            self._end_tool(self._open_tool, None, partial=False)
        block = _Block(kind, len(self._blocks))
        self._blocks.append(block)
        self._by_key[key] = block
        return block

    def _end_tool(self, block: _Block, final_input: dict[str, Any] | None, partial: bool) -> None:
        if block.held:
            self._flush(block)
        block.ended = True
        if self._open_tool is block:
            self._open_tool = None
        if final_input is not None:
            final_input = clean_value(final_input)
        else:
            raw = "".join(block.parts)
            deep = too_deep(raw)  # kept raw: nothing downstream must recurse that far
            parsed = None if deep else parse_object(raw)
            if parsed is not None and ("\\u" in raw or not raw.isascii()):
                parsed = clean_value(parsed)
            if parsed is None:
                block.unparsed = raw
                parsed = {} if deep else clean_value(parse_partial_object(raw))
                if partial:
                    block.input_error = "the reply ended before the arguments were complete"
                else:
                    block.input_error = "the arguments are not a JSON object"
                    self._report_invalid(block, raw)
            final_input = parsed
        block.final_input = final_input
        self.out.append(
            ToolUseEnd(block.index, block.tool_id, block.name, final_input, block.input_error)
        )

    def _report_invalid(self, block: _Block, raw: str) -> None:
        if self.invalid_arguments is not None:
            self.invalid_arguments(block.name, block.tool_id, raw)
        else:
            self.warn(
                "tool_use",
                f"tool {block.name!r} arguments are not a JSON object; kept raw",
                tool_use_id=block.tool_id,
            )

    def final_content(self) -> list[ContentBlock]:
        origin = ProviderRaw(provider=self.provider, model=self.model)
        content: list[ContentBlock] = []
        for block in self._blocks:
            kept = self._raw.get(block.index)
            if block.kind == _TEXT:
                content.append(
                    TextBlock(text="".join(block.parts), provider_raw=self._origin(kept))
                )
            elif block.kind == _THINKING:
                content.append(
                    ThinkingBlock(
                        thinking="".join(block.parts),
                        signature=block.signature,
                        provider_raw=self._origin(kept) or origin,
                    )
                )
            elif block.kind == _REDACTED:
                content.append(
                    RedactedThinkingBlock(
                        data="".join(block.parts), provider_raw=self._origin(kept) or origin
                    )
                )
            else:
                if block.unparsed is not None:
                    kept = {**(kept or {}), "arguments": block.unparsed}
                content.append(
                    ToolUseBlock(
                        id=block.tool_id,
                        name=block.name,
                        input=block.final_input or {},
                        input_error=block.input_error,
                        provider_raw=self._origin(kept),
                    )
                )
        return content

    def _origin(self, data: dict[str, Any] | None) -> ProviderRaw | None:
        if data is None:
            return None
        return ProviderRaw(provider=self.provider, model=self.model, data=dict(data))


def _clean_stop(reason: StopReason | None) -> StopReason | None:
    """The reason with any lone surrogate in the provider's own string replaced."""
    if reason is None or reason.raw is None or reason.raw.isascii():
        return reason
    return StopReason(kind=reason.kind, raw=clean(reason.raw))


def _abrupt(reason: StopReason) -> bool:
    return reason.kind in (StopKind.CANCELLED, StopKind.ERROR)
