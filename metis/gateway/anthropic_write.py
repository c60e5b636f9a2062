"""The Messages API's replies written from canonical ones: the whole message and its event
stream (``message_start``, ``content_block_start``/``delta``/``stop``, ``ping`` after the first
block opens, ``message_delta`` with the usage and stop reason, ``message_stop``; ``error`` when
a stream fails). Anthropic's own server tool blocks, citations and kept blocks (a compaction
block) go back as Anthropic wrote them; the emulator writes its replies here too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.gateway.provenance import unsigned, wrap
from metis.gateway.server_written import anthropic_block, anthropic_citation
from metis.gateway.sse import BlockWriter, dumps, event, new_id, quoted
from metis.model.content import (
    ContentBlock,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    ServerToolCall,
    ServerToolResult,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.model.tier import TierKind

ANTHROPIC = "anthropic"
STOPS = {
    StopKind.END_TURN: "end_turn",
    StopKind.MAX_TOKENS: "max_tokens",
    StopKind.STOP_SEQUENCE: "stop_sequence",
    StopKind.TOOL_USE: "tool_use",
    StopKind.REFUSAL: "refusal",
    StopKind.CONTENT_FILTER: "refusal",
    StopKind.PAUSE_TURN: "pause_turn",
}
USAGE_ORDER = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation",
    "output_tokens",
    "output_tokens_details",
    "server_tool_use",
    "service_tier",
    "inference_geo",
    "speed",
)
"""Where the API puts each usage field; a field it adds later (``iterations``) goes last."""
DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":'
TEXT_DELTA = b'{"type":"text_delta","text":'
THINKING_DELTA = b'{"type":"thinking_delta","thinking":'
INPUT_DELTA = b'{"type":"input_json_delta","partial_json":'
PING = b'event: ping\ndata: {"type":"ping"}\n\n'
TEXT_START = (
    b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,'
    b'"content_block":{"type":"text","text":""}}\n\n'
)
BLOCK_STOP = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}\n\n'
MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
_UNSET_ID = "\0"  # where a stream's own id goes in its message_start template
_STARTS: dict[str, tuple[bytes, bytes]] = {}


def usage(
    tokens: TokenUsage, whole: bool = False, more: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The usage object. ``whole``: as the message (and ``message_start``) carry it, with the
    cache writes by lifetime, the service tier, and where and how fast the call ran when the
    provider said it; ``output_tokens_details.thinking_tokens`` when the model said how many
    of its output tokens were thinking. ``more``: what the API
    reports that the canonical counts do not hold (a compacted call's ``iterations``), each
    in its place. A reply that spent tokens on other models (Anthropic's advisor) lists them
    in ``iterations``, and one whose provider's own tools searched or fetched, the count of
    each in ``server_tool_use``."""
    written: dict[str, Any] = {
        "input_tokens": tokens.input_tokens,
        "cache_creation_input_tokens": tokens.cache_creation_input_tokens,
        "cache_read_input_tokens": tokens.cached_input_tokens,
    }
    if whole:
        hour = min(tokens.cache_creation_1h_input_tokens, tokens.cache_creation_input_tokens)
        written["cache_creation"] = {
            "ephemeral_5m_input_tokens": tokens.cache_creation_input_tokens - hour,
            "ephemeral_1h_input_tokens": hour,
        }
    written["output_tokens"] = tokens.output_tokens
    if tokens.reasoning_tokens:
        written["output_tokens_details"] = {"thinking_tokens": tokens.reasoning_tokens}
    if (tools := tokens.server_tools).web_search or tools.web_fetch:
        written["server_tool_use"] = {
            "web_search_requests": tools.web_search,
            "web_fetch_requests": tools.web_fetch,
        }
    if whole:
        written["service_tier"] = _tier(tokens)
        ran = {"inference_geo": tokens.inference_geo, "speed": tokens.speed}
        written.update((name, said) for name, said in ran.items() if said is not None)
    if tokens.other_models and not (more and "iterations" in more):
        more = {**(more or {}), "iterations": _passes(tokens)}
    if not more:
        return written
    written.update(more)
    place = {name: i for i, name in enumerate(USAGE_ORDER)}
    return {k: written[k] for k in sorted(written, key=lambda k: place.get(k, len(place)))}


def _tier(tokens: TokenUsage) -> str | None:
    """The tier that served the reply, as Anthropic names it (``standard``, ``priority``,
    ``batch``; another tier by its kind); None (``null``, as the SDK's ``Usage`` allows) where
    it is not known: the provider did not say, or a stream's ``message_start`` came first."""
    tier = tokens.service_tier
    if tier is None:
        return None
    return tier.raw if tier.kind is TierKind.OTHER else tier.kind.value


def _passes(tokens: TokenUsage) -> list[dict[str, Any]]:
    """``usage.iterations`` of a reply that spent tokens on other models: the call's own
    counts as its one ``message`` pass, then each other model's as an ``advisor_message``."""
    passes = [{"type": "message", **_counts(tokens)}]
    for other in tokens.other_models:
        passes.append({"type": "advisor_message", "model": other.model, **_counts(other.usage)})
    return passes


def _counts(tokens: TokenUsage) -> dict[str, int]:
    return {
        "input_tokens": tokens.input_tokens,
        "output_tokens": tokens.output_tokens,
        "cache_read_input_tokens": tokens.cached_input_tokens,
        "cache_creation_input_tokens": tokens.cache_creation_input_tokens,
    }


def stop_reason(reason: StopReason) -> str:
    return STOPS.get(reason.kind, "end_turn")


def stop_details(reason: StopReason) -> dict[str, Any]:
    """A refusal's ``stop_details`` (its category, when known, and its explanation, when
    given; a content filter's stop is written as a refusal too, of no category); nothing for
    another stop."""
    if stop_reason(reason) != "refusal":
        return {}
    details = {"type": "refusal", "category": reason.category}
    if reason.explanation is not None:
        details["explanation"] = reason.explanation
    return {"stop_details": details}


def own(raw: ProviderRaw | None) -> dict[str, Any] | None:
    """What Anthropic wrote of a block (or citation) it made; None for anyone else's."""
    if raw is None or raw.provider != ANTHROPIC or not raw.data:
        return None
    return dict(raw.data)


def text_block(item: TextBlock) -> dict[str, Any]:
    found = (own(c.provider_raw) or anthropic_citation(c, item.text) for c in item.citations or ())
    cited = [c for c in found if c]
    return {"type": "text", "text": item.text, **({"citations": cited} if cited else {})}


def block(item: ContentBlock) -> dict[str, Any] | None:
    if isinstance(item, TextBlock):
        return text_block(item)
    if isinstance(item, ThinkingBlock):
        made_by = item.provider_raw
        signature = wrap(made_by, item.signature) if item.signature else unsigned(made_by)
        return {"type": "thinking", "thinking": item.thinking, "signature": signature}
    if isinstance(item, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": wrap(item.provider_raw, item.data)}
    if isinstance(item, ToolUseBlock):
        return {"type": "tool_use", "id": item.id, "name": item.name, "input": item.input}
    if isinstance(item, ServerToolCallBlock | ServerToolResultBlock):
        return own(item.provider_raw) or anthropic_block(item)
    if isinstance(item, OpaqueBlock):
        kept = own(item.provider_raw)
        return dict(kept["item"]) if kept and isinstance(kept.get("item"), Mapping) else None
    return None


def write_message(
    response: CanonicalResponse,
    model: str,
    message_id: str | None = None,
    more_usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Messages API's reply body for ``response``, naming ``model`` as the client did."""
    content = [b for b in map(block, response.content) if b is not None]
    return {
        "id": message_id or new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response.stop_reason),
        "stop_sequence": response.stop_reason.sequence,
        **stop_details(response.stop_reason),
        "usage": usage(response.usage, True, more_usage),
    }


_OPENING = TokenUsage(output_tokens=1)
"""The usage a stream's ``message_start`` reports when the caller knows none."""


def _start_template(model: str) -> tuple[bytes, bytes]:
    """``message_start`` for ``model`` with the usual opening usage, in two halves: its
    message id goes between them (made once per model name)."""
    if len(_STARTS) >= 256:
        _STARTS.clear()
    written = MessageStream(model)._start_event(_UNSET_ID)
    head, _, tail = written.partition(quoted(_UNSET_ID))
    _STARTS[model] = (head, tail)
    return head, tail


class MessageStream(BlockWriter):
    """The canonical events of one call as the Messages API streams them. ``message_id``,
    ``opening`` (the usage ``message_start`` reports: the input, when known) and
    ``more_usage`` (see :func:`usage`, for ``message_delta``) when the caller knows them."""

    def __init__(
        self,
        model: str,
        made_by: ProviderRaw | None = None,
        message_id: str | None = None,
        opening: TokenUsage | None = None,
        more_usage: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.model, self.made_by = model, made_by  # who writes the thinking, when known
        self.message_id, self.more_usage = message_id, more_usage
        self.opening = opening or _OPENING
        self.started = False
        self.pending = ""  # an open server tool call's input, until deltas write it
        self.signed = True  # whether the open thinking block has its signature

    def written(self, item: StreamEvent) -> bytes:
        head = b"" if self.started else self._message_start()
        return head + super().written(item)

    def _message_start(self) -> bytes:
        self.started = True
        message_id = self.message_id or new_id("msg_")
        if self.opening is not _OPENING:
            return self._start_event(message_id)
        head, tail = _STARTS.get(self.model) or _start_template(self.model)
        return b"".join((head, quoted(message_id), tail))

    def _start_event(self, message_id: str) -> bytes:
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage(self.opening, True),
        }
        return event("message_start", {"type": "message_start", "message": message})

    def _event(self, name: str, **fields: Any) -> bytes:
        return event(name, {"type": name, **fields})

    def _start(self, opening: dict[str, Any] | None) -> bytes:
        """A block's ``content_block_start`` (``opening`` None: an empty text block)."""
        index = self.blocks
        if opening is None:
            started = TEXT_START % index
        else:
            started = self._event("content_block_start", index=index, content_block=opening)
        return started + PING if index == 0 else started

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        if isinstance(item, ToolUseStart):
            opening = {"type": "tool_use", "id": item.tool_use_id, "name": item.tool_name}
            return self._start({**opening, "input": {}}) + self._input_delta("")
        if kind == "thinking" and isinstance(item, ThinkingDelta) and item.redacted_data:
            return self._start(
                {"type": "redacted_thinking", "data": wrap(self.made_by, item.redacted_data)}
            )
        if kind == "thinking":
            self.signed = False
            return self._start({"type": "thinking", "thinking": "", "signature": ""})
        return self._start(None)

    def server_call(self, item: ServerToolCall) -> bytes:
        """A server tool's call, open as a tool's: its input in deltas, or whole at its end."""
        written = block(item.block)
        if written is None:
            return b""
        out = self._close() + self._start({**written, "input": {}}) + self._input_delta("")
        self.open_kind, self.open_index = "tool", item.content_block_index
        self.input_written = False
        self.pending = dumps(written["input"]) if written.get("input") else ""
        self.blocks += 1
        return out

    def server_result(self, item: ServerToolResult) -> bytes:
        return self.whole_block(item.block)

    def kept(self, item: OpaqueBlock) -> bytes:
        """A kept block, written whole (a compaction block: its summary in one delta)."""
        head = b"" if self.started else self._message_start()
        return head + self.whole_block(item)

    def whole_block(self, item: ContentBlock) -> bytes:
        written = block(item)
        if written is None:
            return b""
        out, index = self._close(), self.blocks
        if written.get("type") == "compaction":
            summary = {"type": "compaction_delta", "content": written.get("content")}
            out += self._start({**written, "content": None})
            out += self._event("content_block_delta", index=index, delta=summary)
        else:
            out += self._start(written)
        self.blocks += 1
        return out + BLOCK_STOP % index

    def citation(self, item: CitationDelta) -> bytes:
        cited = own(item.citation.provider_raw) or anthropic_citation(item.citation, "")
        return self._delta(type="citations_delta", citation=cited) if cited else b""

    def _delta(self, **delta: Any) -> bytes:
        return self._event("content_block_delta", index=self.blocks - 1, delta=delta)

    def _string_delta(self, kind: bytes, text: str) -> bytes:
        """``_delta(type=kind, <member>=text)`` from a template: most of a stream's events."""
        return b"".join((DELTA_HEAD % (self.blocks - 1), kind, quoted(text), b"}}\n\n"))

    def _input_delta(self, partial: str) -> bytes:
        return b"".join((DELTA_HEAD % self.blocks, INPUT_DELTA, quoted(partial), b"}}\n\n"))

    def text(self, item: TextDelta) -> bytes:
        return self._string_delta(TEXT_DELTA, item.text) if item.text else b""

    def text_template(self) -> tuple[bytes, bytes]:
        return DELTA_HEAD % (self.blocks - 1) + TEXT_DELTA, b"}}\n\n"

    def input_template(self) -> tuple[bytes, bytes]:
        return DELTA_HEAD % (self.blocks - 1) + INPUT_DELTA, b"}}\n\n"

    def thinking_template(self) -> tuple[bytes, bytes]:
        return DELTA_HEAD % (self.blocks - 1) + THINKING_DELTA, b"}}\n\n"

    def thinking(self, item: ThinkingDelta) -> bytes:
        out = self._string_delta(THINKING_DELTA, item.thinking) if item.thinking else b""
        if item.signature:
            self.signed = True
            signature = wrap(self.made_by, item.signature, item.provider_data)
            out += self._delta(type="signature_delta", signature=signature)
        return out

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        return self._string_delta(INPUT_DELTA, item.partial_json)

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        pending, self.pending = self.pending, ""
        written = bool(pending) and not self.input_written
        whole = self._string_delta(INPUT_DELTA, pending) if written else b""
        if kind == "thinking" and not self.signed and self.made_by is not None:
            self.signed = True  # as Anthropic ends each thinking block: with its signature
            whole += self._delta(type="signature_delta", signature=unsigned(self.made_by))
        return whole + BLOCK_STOP % (self.blocks - 1)

    def complete(self, item: MessageComplete) -> bytes:
        reason = item.stop_reason
        delta = {
            "stop_reason": stop_reason(reason),
            "stop_sequence": reason.sequence,
            **stop_details(reason),
        }
        written = usage(item.usage, more=self.more_usage)
        return self._event("message_delta", delta=delta, usage=written) + MESSAGE_STOP

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        return event("error", body)
