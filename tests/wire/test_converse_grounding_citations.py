"""Nova 2's web grounding on Converse: the answer's ``text`` block is followed by a
``citationsContent`` block with no text of its own (only ``citations``), as the Nova 2 user
guide's web-grounding sample reads it; those citations belong to the text before them, whole
and streamed, and make no empty text block (docs/contract.md §12)."""

from __future__ import annotations

import copy
from typing import Any

from metis.model.content import TextBlock
from metis.stages.policy.invariants import StreamChecker
from metis.wire.bedrock_converse import codec
from metis.wire.builder import MessageBuilder

MODEL = "bedrock:us.amazon.nova-2-lite-v1:0"
SAID = "Python 3.14 is out."
SOURCES = [
    {"location": {"web": {"url": "https://www.python.org/downloads/", "domain": "python.org"}}},
    {"location": {"web": {"url": "https://docs.python.org/3/", "domain": "docs.python.org"}}},
]
BODY = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [{"text": SAID}, {"citationsContent": {"citations": SOURCES}}],
        }
    },
    "stopReason": "end_turn",
    "usage": {"inputTokens": 12, "outputTokens": 8},
}


def delta(index: int, value: dict[str, Any]) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": value}}


def _content(events: list[Any]) -> list[Any]:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return list(events[-1].final_content)


def _cited(content: list[Any]) -> None:
    (text,) = content
    assert isinstance(text, TextBlock) and text.text == SAID
    assert [c.url for c in text.citations] == [s["location"]["web"]["url"] for s in SOURCES]


def test_whole_grounded_text_carries_the_citations_that_follow_it() -> None:
    builder = MessageBuilder("bedrock", MODEL)
    _cited(_content(list(codec.parse_body(copy.deepcopy(BODY), builder))))


def test_streamed_grounded_text_carries_the_citations_that_follow_it() -> None:
    events = [
        {"messageStart": {"role": "assistant"}},
        delta(0, {"text": "Python 3.14 "}),
        delta(0, {"text": "is out."}),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        *(delta(1, {"citation": source}) for source in SOURCES),
        {"contentBlockStop": {"contentBlockIndex": 1}},
        {"messageStop": {"stopReason": "end_turn"}},
        {"metadata": {"usage": {"inputTokens": 12, "outputTokens": 8}}},
    ]
    parser = codec.stream_parser(MessageBuilder("bedrock", MODEL))
    made = [event for obj in events for event in parser.feed(obj)]
    _cited(_content(made + list(parser.end())))
