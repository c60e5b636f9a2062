"""A translated stream's text deltas are written from the open text block's template (most of
a stream's events, without the writer's dispatch): byte for byte what the writer's general
path makes for the same events, in the Messages and the Chat writers, across blocks opened
and closed by thinking, tool calls, citations and the end."""

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
    END,
]


def writers(api: str) -> tuple[BlockWriter, BlockWriter]:
    if api == "anthropic":
        return MessageStream("claude", None, "msg_1"), MessageStream("claude", None, "msg_1")
    chat = ("gpt", True, False, "c1")
    return ChunkStream(*chat), ChunkStream(*chat)


@pytest.mark.parametrize("api", ["anthropic", "chat"])
def test_text_from_the_template_is_what_the_general_path_writes(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat_write, "now", lambda: 1700000000)  # one `created` for both
    templated, general = writers(api)
    took_template = 0
    for event in EVENTS:
        if event.__class__ is TextDelta and event.content_block_index == templated.text_at:
            took_template += 1
        assert templated.feed(event) == general.written(event), event
    assert took_template == 6  # the texts after the first of each text block
    assert templated.text_at is None  # the end closed the block: no template left open


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
