"""Turning a provider's blocks into canonical events, and the events into the final message.

Every codec's parser drives one ``MessageBuilder`` per call: it names provider blocks by a key
of its own (Anthropic's block index, OpenAI's tool-call index) and the builder assigns the
canonical ``content_block_index``, keeps every stream invariant of docs/contract.md §2, and at
the end assembles ``final_content`` from what it kept, text joined once from its fragments.

The caller pulls, as with h11: the builder's methods record the events they make, and
:meth:`MessageBuilder.take` hands out those made since the last take. A parser's ``feed``
returns ``builder.take()``, so a provider object's events come back from feeding it; events
made by an object whose reading then failed stay in the builder and come out with the
message's end (``finish`` then ``take``), so nothing that arrived is lost. Nothing is assigned
to the builder from outside: the usage estimate is a function given at construction, and a
tool call whose arguments are not a JSON object is data on its events (``input_error``, the
text in ``provider_raw``) for the reader to report.

A tool call's lifetime (its fragments, and whether its arguments ended cut off) is in
:mod:`metis.wire.builder_tools`; what arrives whole (server tools, images, citations) in
:mod:`metis.wire.builder_whole`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Unpack

from metis.catalog.token_profile import CHARS_PER_TOKEN
from metis.model.content import ContentBlock
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseInputDelta,
)
from metis.model.response import ModelUsage, ServerToolRequests, StopReason, TokenUsage, UsageDetail
from metis.model.tier import ServiceTier
from metis.wire.blocks import OPAQUE, REDACTED, TEXT, THINKING, Block, final_content, unsaid
from metis.wire.builder_tools import (
    CUT_OFF_ARGUMENTS,
    INVALID_ARGUMENTS,
    OUTPUT_LIMIT_ARGUMENTS,
    ToolCalls,
)
from metis.wire.builder_whole import WholeBlocks
from metis.wire.read import token_count
from metis.wire.unicode_text import (
    REPLACEMENT,
    clean,
    clean_model,
    clean_value,
    clean_words,
    joined,
)

_USAGE_FIELDS = tuple(TokenUsage.model_fields)  # the counts, estimated, then the extras

Warn = Callable[..., None]

NO_EVENTS: Sequence[StreamEvent] = ()
"""What reading an object that makes no event returns."""

__all__ = [
    "CUT_OFF_ARGUMENTS",
    "INVALID_ARGUMENTS",
    "NO_EVENTS",
    "OUTPUT_LIMIT_ARGUMENTS",
    "MessageBuilder",
    "Warn",
]


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


class MessageBuilder(ToolCalls, WholeBlocks):
    """One message's blocks and events.

    ``warn`` reports content dropped on the way in (a block type the canonical model has no
    room for); ``estimate_input_tokens``, when given, is asked at the end for the request's
    input size if the provider reported no usage at all: the counts are then estimated (the
    output from what arrived) and marked ``estimated``."""

    def __init__(
        self,
        provider: str,
        model: str,
        warn: Warn = _ignore,
        estimate_input_tokens: Callable[[], int] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.warn = warn
        self._estimate_input_tokens = estimate_input_tokens
        self._events: list[StreamEvent] = []
        self.started = self.completed = False
        self.message_id: str | None = None
        self.reported_model: str | None = None
        self.stop_reason: StopReason | None = None
        self.usage_reported = self.usage_estimated = self.usage_unknown = False
        self.output_count_pending = False
        """The output count reported so far is a placeholder (Anthropic's ``message_start``
        says 1); if the message ends before the real count, it is estimated from what arrived."""
        self._usage = [0, 0, 0, 0, 0]
        self._extras: dict[str, Any] = {}  # TokenUsage.other_models, .server_tools... UsageDetail
        self._blocks: list[Block] = []
        self._by_key: dict[Hashable, Block] = {}
        self._open_tool: Block | None = None
        self._waiting: Block | None = None  # a tool call whose end waits for the stop reason
        self._raw: dict[int, dict[str, Any]] = {}

    def take(self) -> Sequence[StreamEvent]:
        """The events made since the last ``take``, in order; the builder keeps none of them."""
        events = self._events
        if not events:
            return NO_EVENTS
        self._events = []
        return events

    # Message level -----------------------------------------------------------------------

    def start(self, message_id: str | None = None, model: str | None = None) -> None:
        message_id, model = message_id and clean(message_id), model and clean(model)
        if self.started:
            self.message_id = self.message_id or message_id
            self.reported_model = self.reported_model or model
            return
        self.started = True
        self.message_id, self.reported_model = message_id, model
        self._events.append(MessageStart(message_id, model))

    def usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cached_input_tokens: int | None = None,
        cache_creation_input_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        other_models: tuple[ModelUsage, ...] | None = None,
        server_tools: ServerToolRequests | None = None,
        service_tier: ServiceTier | None = None,
        **detail: Unpack[UsageDetail],
    ) -> None:
        """Record counts the provider reported (``None`` leaves one as it was; one not a whole
        number from 0 to ``MAX_TOKEN_COUNT`` is a ProtocolError), each as TokenUsage's field."""
        other_models = other_models and tuple(map(clean_model, other_models))
        extras = zip(_USAGE_FIELDS[6:9], (other_models, server_tools, service_tier), strict=True)
        self._extras.update(((k, v) for k, v in extras if v is not None), **clean_value(detail))
        counts = (input_tokens, output_tokens, cached_input_tokens, cache_creation_input_tokens)
        for i, value in enumerate((*counts, reasoning_tokens)):
            if value is not None and not self.usage_unknown:
                self._usage[i] = token_count(value, _USAGE_FIELDS[i], self.provider)
                self.usage_reported = True

    def unknown_usage(self) -> None:
        """Forget the counts: estimated at the end as if the provider had sent none."""
        self._usage, self.usage_unknown, self.usage_estimated = [0, 0, 0, 0, 0], True, True

    def stop(self, reason: StopReason) -> None:
        """Note why the message stopped; ``finish`` ends it (providers send usage after)."""
        self.stop_reason = clean_words(reason)

    def finish(self, reason: StopReason | None = None) -> None:
        """End the message: close any tool still open, then ``message.complete`` (``take``
        hands them out). Once ended, a message stays as it is."""
        if self.completed:
            return
        self.start()
        stop = (reason and clean_words(reason)) or self.stop_reason or unsaid(self._blocks)
        for block in self._blocks:
            if block.held:
                self._flush(block)
        self._end_calls(stop)
        if (self.usage_unknown or not self.usage_reported) and self._estimate_input_tokens:
            self._usage[0] = self._estimate_input_tokens()
            self.usage_estimated = True
        if self.usage_estimated or self.output_count_pending:
            self._usage[1] = int(sum(map(len, self.output_text())) / CHARS_PER_TOKEN)
            self.usage_estimated = True
        self.completed = True
        self._events.append(
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
            **self._extras,
        )

    def output_text(self) -> list[str]:
        """Every fragment of text, reasoning and tool input received so far."""
        return [part for block in self._blocks for part in block.parts]

    # Blocks ------------------------------------------------------------------------------

    def text(self, key: Hashable, text: str) -> None:
        block = self._by_key.get(key)
        if block is None or block.kind != TEXT or block.index != len(self._blocks) - 1:
            block = self._open(key, TEXT)
        if block.held or not text.isascii():
            text = self._unicode(block, text)
            if not text:
                return
        block.parts.append(text)
        self._events.append(TextDelta(block.index, text))

    def take_text(self, key: Hashable, text: str) -> Sequence[StreamEvent]:
        """``text(key, text)`` then ``take()`` in one call: a parser's hot path."""
        block = self._by_key.get(key)
        if (
            self._events
            or block is None
            or block.kind != TEXT
            or block.held
            or block.index != len(self._blocks) - 1
            or not text.isascii()
        ):
            self.text(key, text)
            return self.take()
        block.parts.append(text)
        return (TextDelta(block.index, text),)

    def thinking(self, key: Hashable, text: str) -> None:
        block = self._thinking_block(key)
        if block.held or not text.isascii():
            text = self._unicode(block, text)
            if not text:
                return
        block.parts.append(text)
        self._events.append(ThinkingDelta(block.index, text))

    def thinking_signature(
        self, key: Hashable, signature: str, data: dict[str, Any] | None = None
    ) -> None:
        """``data``: what the provider takes the signature back only with (ThinkingDelta)."""
        block, signature, data = self._thinking_block(key), clean(signature), clean_value(data)
        block.signature = (block.signature or "") + signature
        self._events.append(ThinkingDelta(block.index, "", signature=signature, provider_data=data))

    def redacted_thinking(self, key: Hashable, data: str) -> None:
        block = self._open(key, REDACTED)
        data = clean(data)
        block.parts.append(data)
        self._events.append(ThinkingDelta(block.index, "", redacted_data=data))

    def opaque(
        self, key: Hashable, kind: str, item: dict[str, Any], place: str | None = None
    ) -> None:
        """Keep a block that has no canonical meaning, whole: the provider's ``kind`` and its
        own ``item`` (called again for the same key, the item is replaced by the later form);
        ``place`` names where in the provider's message it goes back, for a provider with more
        than one such place. It makes no event; it is in ``final_content`` as an OpaqueBlock
        (docs/contract.md §8)."""
        block = self._by_key.get(key)
        if block is None or block.kind != OPAQUE:
            block = self._open(key, OPAQUE)
        block.name, block.item, block.place = clean(kind), clean_value(item), place

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

    def _thinking_block(self, key: Hashable) -> Block:
        block = self._by_key.get(key)
        if block is None or block.kind != THINKING or block.index != len(self._blocks) - 1:
            block = self._open(key, THINKING)
        return block

    def _unicode(self, block: Block, text: str) -> str:
        """``text`` after the surrogate ``block`` held; holds a new trailing one."""
        text, block.held = joined(block.held, text)
        return text

    def _flush(self, block: Block) -> None:
        """A held high surrogate whose low half never came: it becomes U+FFFD."""
        block.held = ""
        block.parts.append(REPLACEMENT)
        if block.kind == TEXT:
            self._events.append(TextDelta(block.index, REPLACEMENT))
        elif block.kind == THINKING:
            self._events.append(ThinkingDelta(block.index, REPLACEMENT))
        else:
            self._events.append(ToolUseInputDelta(block.index, block.tool_id, REPLACEMENT))

    def _open(self, key: Hashable, kind: str) -> Block:
        if not self.started:
            self.start()
        if self._blocks and self._blocks[-1].held:
            self._flush(self._blocks[-1])
        self._before_next_block()
        block = Block(kind, len(self._blocks))
        self._blocks.append(block)
        self._by_key[key] = block
        return block

    def final_content(self) -> list[ContentBlock]:
        return final_content(self._blocks, self._raw, self.provider, self.model)
