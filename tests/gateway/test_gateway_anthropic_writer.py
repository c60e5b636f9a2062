"""The Messages API writer gives back what Anthropic made as Anthropic wrote it: server tool
calls and results, citations and a compaction block, whole and streamed, and the usage fields
the API reports (cache writes by lifetime, the service tier); anyone else's are left out."""

from __future__ import annotations

import json
from typing import Any

from metis.gateway.anthropic_write import MessageStream, usage, write_message
from metis.gateway.provenance import unwrap
from metis.histories.blocks import from_anthropic_block, opaque
from metis.model.citation import Citation
from metis.model.content import ContentBlock, ProviderRaw, TextBlock, ThinkingBlock
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    ServerToolCall,
    ServerToolResult,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
)
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.wire.anthropic.server_tools import citation

CALL = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}}
RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://a.example", "title": "A"}],
}
CITED = {
    "type": "web_search_result_location",
    "url": "https://a.example",
    "title": "A",
    "cited_text": "A",
    "encrypted_index": "e1",
}
COMPACTION = {"type": "compaction", "content": "The story so far."}
TOKENS = TokenUsage(input_tokens=10, cached_input_tokens=4, cache_creation_input_tokens=3)


def own(block: dict[str, Any]) -> ContentBlock:
    found = from_anthropic_block(block, block["type"], "content", {}, "claude")
    assert found is not None
    return found


def foreign_citation() -> Citation:
    raw = ProviderRaw(provider="openai", data={"type": "url_citation", "url": "https://b"})
    return Citation(kind="url", url="https://b", provider_raw=raw)


FOREIGN_CITED = {
    "type": "web_search_result_location",
    "url": "https://b",
    "title": None,
    "cited_text": "",
    "encrypted_index": "metis1.written",
}
"""Another provider's citation of a web page, as Anthropic writes one (its index is
Anthropic's own: the gateway's mark instead, metis/gateway/server_written.py)."""


def test_a_whole_message_keeps_anthropics_own_blocks_and_citations() -> None:
    text = TextBlock(text="A says so.", citations=[citation(CITED), foreign_citation()])
    foreign = opaque("compaction", COMPACTION, "openai")
    content = [own(COMPACTION), own(CALL), own(RESULT), text, foreign]
    response = CanonicalResponse(
        request_id="r",
        model="claude",
        provider="anthropic",
        content=content,
        stop_reason=StopReason(kind=StopKind.END_TURN),
        usage=TOKENS,
        latency_ms=0,
    )
    message = write_message(response, "claude", "msg_1")
    assert message["id"] == "msg_1"
    assert message["content"] == [
        COMPACTION,
        CALL,
        RESULT,
        {"type": "text", "text": "A says so.", "citations": [CITED, FOREIGN_CITED]},
    ]
    assert message["usage"] == {
        "input_tokens": 10,
        "cache_creation_input_tokens": 3,
        "cache_read_input_tokens": 4,
        "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 0,
        "service_tier": None,  # the provider said none
    }


def test_usage_puts_what_the_api_adds_in_its_place() -> None:
    more = {"iterations": [], "output_tokens_details": {"thinking_tokens": 0}}
    written = usage(TOKENS, True, more)
    assert list(written) == [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation",
        "output_tokens",
        "output_tokens_details",
        "service_tier",
        "iterations",
    ]
    assert list(usage(TOKENS)) == [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    ]


def events(written: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in written.split(b"\n\n")[:-1]:
        head, _, payload = frame.partition(b"\ndata: ")
        out.append((head.removeprefix(b"event: ").decode(), json.loads(payload)))
    return out


def test_a_stream_writes_server_tools_citations_and_a_kept_block() -> None:
    writer = MessageStream("claude", message_id="msg_1", opening=TOKENS)
    written = writer.kept(own(COMPACTION))  # type: ignore[arg-type]
    written += writer.feed(ServerToolCall(1, own(CALL)))  # type: ignore[arg-type]
    written += writer.feed(ServerToolResult(2, own(RESULT)))  # type: ignore[arg-type]
    written += writer.feed(CitationDelta(3, citation(CITED)))
    written += writer.feed(CitationDelta(3, foreign_citation()))
    written += writer.feed(TextDelta(3, "A says so."))
    end = StopReason(kind=StopKind.END_TURN)
    written += writer.feed(MessageComplete([], end, TOKENS))
    got = events(written)
    assert got[0][1]["message"]["id"] == "msg_1"
    assert got[0][1]["message"]["usage"]["cache_read_input_tokens"] == 4
    starts = [d["content_block"] for n, d in got if n == "content_block_start"]
    assert starts == [
        {**COMPACTION, "content": None},
        {**CALL, "input": {}},
        RESULT,
        {"type": "text", "text": ""},
    ]
    deltas = [(d["index"], d["delta"]) for n, d in got if n == "content_block_delta"]
    assert deltas == [
        (0, {"type": "compaction_delta", "content": "The story so far."}),
        (1, {"type": "input_json_delta", "partial_json": ""}),
        (1, {"type": "input_json_delta", "partial_json": '{"q":"x"}'}),  # whole, at its end
        (3, {"type": "citations_delta", "citation": CITED}),
        (3, {"type": "citations_delta", "citation": FOREIGN_CITED}),
        (3, {"type": "text_delta", "text": "A says so."}),
    ]
    stops = [d["index"] for n, d in got if n == "content_block_stop"]
    assert stops == [0, 1, 2, 3]
    assert [n for n, _ in got].count("ping") == 1


def test_a_server_calls_input_in_deltas_is_not_written_twice() -> None:
    writer = MessageStream("claude")
    written = writer.feed(ServerToolCall(0, own(CALL)))  # type: ignore[arg-type]
    written += writer.feed(ToolUseInputDelta(0, "srvtoolu_1", '{"q":'))
    written += writer.feed(ToolUseInputDelta(0, "srvtoolu_1", '"x"}'))
    written += writer.feed(ToolUseEnd(0, "srvtoolu_1", "web_search", {"q": "x"}))
    inputs = [d["delta"]["partial_json"] for n, d in events(written) if n == "content_block_delta"]
    assert inputs == ["", '{"q":', '"x"}']


def _parsed(stream: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in stream.decode().split("\n\n")[:-1]:
        name, data = frame.split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def test_the_templated_events_are_what_the_general_writer_makes() -> None:
    """The events written from prepared bytes (message_start, a text block's start and stop,
    ping, message_stop) are byte for byte what encoding each object writes, for any model name
    and message id, given or made."""
    from metis.gateway.sse import event

    ending = MessageComplete([], StopReason(kind=StopKind.END_TURN), TOKENS)
    for model in ("claude-x", 'a "quoted" modèle\\', "\u0000odd"):
        for given in (None, 'msg_"given"'):
            writer = MessageStream(model, None, given)
            written = writer.feed(TextDelta(0, "hi")) + writer.feed(ending)
            events = _parsed(written)
            assert b"".join(event(name, data) for name, data in events) == written
            start = events[0][1]["message"]
            assert start["model"] == model
            assert start["id"] == given if given else start["id"].startswith("msg_")
            assert start["usage"]["output_tokens"] == 1
            names = [name for name, _ in events]
            assert names == [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
    opened = MessageStream("m", None, "msg_1", TokenUsage(input_tokens=7))
    first = _parsed(opened.feed(TextDelta(0, "x")))[0][1]
    assert first["message"]["usage"]["input_tokens"] == 7


def test_thinking_its_maker_left_unsigned_is_handed_out_with_its_maker() -> None:
    """Gemini's thought summaries have no signature: the block is handed out with its maker
    alone (streamed: in a ``signature_delta`` before the block ends, as Anthropic ends every
    thinking block), so a client sending it back sends it to Gemini only. Empty, it would read
    as the client's own and go to a Claude model, which refuses it."""
    gemini = ProviderRaw(provider="gemini", model="gemini:gemini-2.5-flash")
    thought = ThinkingBlock(thinking="Hmm.", provider_raw=gemini)
    response = CanonicalResponse(
        request_id="r",
        model="gemini-2.5-flash",
        provider="gemini",
        content=[thought, TextBlock(text="Hi")],
        stop_reason=StopReason(kind=StopKind.END_TURN),
        usage=TOKENS,
        latency_ms=0,
    )
    whole = write_message(response, "flash")["content"][0]["signature"]
    writer = MessageStream("flash", gemini)
    written = writer.feed(ThinkingDelta(0, "Hmm."))
    written += writer.feed(TextDelta(1, "Hi"))
    got = [d for n, d in events(written) if n.startswith("content_block")]
    assert [d["type"] for d in got][:4] == [
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
    ]
    streamed = got[2]["delta"]
    assert streamed["type"] == "signature_delta" and streamed["signature"] == whole
    assert unwrap(whole) == (gemini, "")
    route = MessageStream("flash")
    unknown = route.feed(ThinkingDelta(0, "Hmm.")) + route.feed(TextDelta(1, "Hi"))
    assert b"signature_delta" not in unknown  # a route's maker, known only once it answered
