"""A translated stream's text, thinking and tool input deltas are written from the open block's
template (most of a stream's events, without the writer's dispatch): byte for byte what the
writer's general path makes for the same events, in the Messages and the Chat writers (and
Chat's deprecated function calling, which has no input template), across blocks opened and
closed by thinking, signatures, a redacted block, tool calls, citations and the end."""

from __future__ import annotations

import pytest

from metis.gateway import chat_write
from metis.gateway.anthropic_write import MessageStream
from metis.gateway.chat_write import ChunkStream
from metis.gateway.sse import BlockWriter
from metis.model.citation import Citation
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import StopKind, StopReason, TokenUsage

CITED = Citation(kind="url", url="https://a.example", title="A")
END = MessageComplete(
    stop_reason=StopReason(kind=StopKind.END_TURN), usage=TokenUsage(), final_content=[]
)
EVENTS: list[StreamEvent] = [
    ThinkingDelta(0, "Hm."),
    TextDelta(1, "A "),
    TextDelta(1, ""),
    TextDelta(1, 'quote " and \\ and\nnew line'),
    TextDelta(1, "é ✓ 🙂"),
    TextDelta(1, "lone \ud800 surrogate"),
    CitationDelta(1, CITED),
    TextDelta(1, "cited"),
    ToolUseStart(2, "call_1", "lookup"),
    ToolUseInputDelta(2, "call_1", '{"q":'),
    TextDelta(2, "not this block's"),
    ToolUseInputDelta(2, "call_1", '"x"}'),
    ToolUseEnd(2, "call_1", "lookup", {"q": "x"}),
    TextDelta(3, "after the call"),
    TextDelta(3, " and more"),
    TextDelta(5, "a block further on"),
    ThinkingDelta(6, "again"),
    TextDelta(5, "an earlier block's index"),
    ToolUseStart(7, "call_2", "lookup"),
    ToolUseInputDelta(7, "call_2", '{"a":'),
    ToolUseInputDelta(7, "call_2", ""),
    ToolUseInputDelta(7, "call_2", '"é \\" 🙂 \ud800"}'),
    ToolUseEnd(7, "call_2", "lookup", {"a": "é"}),
    ThinkingDelta(8, "more "),
    ThinkingDelta(8, "thought, ✓"),
    ThinkingDelta(8, ""),
    ThinkingDelta(8, "signed", signature="sig"),
    ThinkingDelta(8, "after its signature"),
    ThinkingDelta(9, "", redacted_data="opaque"),
    ThinkingDelta(9, "in a redacted block"),
    ToolUseStart(10, "call_3", "lookup"),
    ToolUseEnd(10, "call_3", "lookup", {"whole": True}),
    END,
]


def writers(api: str) -> tuple[BlockWriter, BlockWriter]:
    if api == "anthropic":
        return MessageStream("claude", None, "msg_1"), MessageStream("claude", None, "msg_1")
    chat = ("gpt", True, api == "chat-legacy", "c1")
    return ChunkStream(*chat), ChunkStream(*chat)


@pytest.mark.parametrize("api", ["anthropic", "chat", "chat-legacy"])
def test_deltas_from_the_template_are_what_the_general_path_writes(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat_write, "now", lambda: 1700000000)  # one `created` for both
    templated, general = writers(api)
    texts = inputs = thoughts = 0
    for event in EVENTS:
        if event.__class__ is TextDelta and event.content_block_index == templated.text_at:
            texts += 1
        inputs += event.__class__ is ToolUseInputDelta and templated.input_around is not None
        if event.__class__ is ThinkingDelta and event.content_block_index == templated.thinking_at:
            thoughts += 1
        assert templated.feed(event) == general.written(event), event
        assert templated.input_written == general.input_written
    assert texts == 6  # the texts after the first of each text block
    assert inputs == (0 if api == "chat-legacy" else 4)  # those while a call is open
    assert thoughts == 5  # those after the first of each thinking block
    assert templated.text_at is None  # the end closed the block: no template left open
    assert templated.input_around is None and templated.thinking_at is None


def test_a_writer_without_a_template_writes_every_text_by_its_kind() -> None:
    class Plain(BlockWriter):
        def open_block(self, kind: str, item: StreamEvent) -> bytes:
            return b"<%s>" % kind.encode()

        def text(self, item: TextDelta) -> bytes:
            return item.text.encode()

        def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
            return b"</>"

        def complete(self, item: MessageComplete) -> bytes:
            return b"."

    writer = Plain()
    written = b"".join(writer.feed(e) for e in (TextDelta(0, "a"), TextDelta(0, "b"), END))
    assert written == b"<text>ab</>."
    assert writer.text_at is None
