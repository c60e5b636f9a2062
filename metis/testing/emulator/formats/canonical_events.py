"""The emulator's reply as a canonical one, and that as the stream of canonical events a model
would have sent for it (text and thinking a few words a delta, tool arguments in fragments),
for the gateway's writers to write in each API's form."""

from __future__ import annotations

from metis.model.content import (
    ContentBlock,
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
from metis.model.response import (
    CanonicalResponse,
    ServerToolRequests,
    StopKind,
    StopReason,
    TokenUsage,
)
from metis.testing.emulator.model import Reply
from metis.testing.emulator.wire import dumps, split_json, split_text


def response_of(reply: Reply, content: list[ContentBlock], model: str) -> CanonicalResponse:
    """``reply`` with ``content`` (its blocks, as the API has them), its stop and its usage
    (its web searches and fetches counted among the server tools' requests)."""
    usage = reply.usage
    names = [getattr(out, "name", None) for out in reply.server]
    searches, fetches = names.count("web_search"), names.count("web_fetch")
    tokens = TokenUsage(
        input_tokens=usage.uncached_input,
        cached_input_tokens=usage.cache_read,
        cache_creation_input_tokens=usage.cache_write,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.thinking_tokens,
        server_tools=ServerToolRequests(web_search=searches, web_fetch=fetches),
    )
    stop = StopReason(
        kind=StopKind(reply.stop),
        sequence=reply.stop_sequence,
        category=reply.category,
        explanation=reply.explanation,
    )
    return CanonicalResponse(
        request_id="", model=model, provider="", content=content, stop_reason=stop,
        usage=tokens, latency_ms=0,
    )  # fmt: skip


def events_of(response: CanonicalResponse) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for index, block in enumerate(response.content):
        events += block_events(index, block)
    return [*events, MessageComplete([], response.stop_reason, response.usage)]


def block_events(index: int, block: ContentBlock, empty_input: bool = True) -> list[StreamEvent]:
    """A block's events; ``empty_input``: a call with no arguments streams ``{}`` (else
    nothing)."""
    if isinstance(block, ThinkingBlock):
        pieces = split_text(block.thinking) or [""]
        signed = [ThinkingDelta(index, signature=block.signature)] if block.signature else []
        return [*(ThinkingDelta(index, piece) for piece in pieces), *signed]
    if isinstance(block, TextBlock):
        cited = [CitationDelta(index, c) for c in block.citations or ()]
        return [*cited, *(TextDelta(index, piece) for piece in split_text(block.text))]
    if isinstance(block, ServerToolResultBlock):  # comes whole
        return [ServerToolResult(index, block)]
    if not isinstance(block, ToolUseBlock | ServerToolCallBlock):
        return []
    given = block.input
    pieces = split_json(dumps(given).decode()) if given or empty_input else []
    deltas = [ToolUseInputDelta(index, block.id, piece) for piece in pieces]
    start: StreamEvent = (
        ServerToolCall(index, block)
        if isinstance(block, ServerToolCallBlock)
        else ToolUseStart(index, block.id, block.name)
    )
    return [start, *deltas, ToolUseEnd(index, block.id, block.name, given)]
