"""The Chat Completions writer: the message's ``annotations`` (a search model's URL citations,
``[]`` without), whole and as one chunk after the text; reasoning first opening as DeepSeek
streams it, the role named once; the cache writes in the usage; the id and the fields every
chunk carries when the caller names them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.gateway.chat_write import ChunkStream, write_completion
from metis.model.citation import Citation, TextSpan
from metis.model.content import ContentBlock, TextBlock, ThinkingBlock
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage

CITED = Citation(kind="url", url="https://a.example", title="A", span=TextSpan(start=0, end=4))
ANNOTATION = {
    "type": "url_citation",
    "url_citation": {"start_index": 0, "end_index": 4, "url": "https://a.example", "title": "A"},
}
END = StopReason(kind=StopKind.END_TURN)


def response(content: list[ContentBlock], tokens: TokenUsage | None = None) -> CanonicalResponse:
    return CanonicalResponse(
        request_id="r",
        model="gpt",
        provider="openai",
        content=content,
        stop_reason=END,
        usage=tokens or TokenUsage(),
        latency_ms=0,
    )


def test_a_whole_completion_has_its_annotations_and_cache_writes() -> None:
    tokens = TokenUsage(input_tokens=5, cached_input_tokens=2, cache_creation_input_tokens=3)
    written = write_completion(
        response([TextBlock(text="A is", citations=[CITED])], tokens), "gpt", completion_id="c1"
    )
    assert written["id"] == "c1"
    message = written["choices"][0]["message"]
    assert list(message) == ["role", "content", "refusal", "annotations"]
    assert message["annotations"] == [ANNOTATION]
    assert written["usage"]["prompt_tokens"] == 10
    assert written["usage"]["prompt_tokens_details"]["cache_write_tokens"] == 3
    plain = write_completion(response([TextBlock(text="hi")]), "gpt")
    assert plain["choices"][0]["message"]["annotations"] == []
    assert "cache_write_tokens" not in plain["usage"]["prompt_tokens_details"]


def test_empty_reasoning_is_written_as_empty() -> None:
    written = write_completion(response([ThinkingBlock(thinking=""), TextBlock(text="x")]), "m")
    assert written["choices"][0]["message"]["reasoning_content"] == ""


def deltas(written: bytes) -> list[dict[str, Any]]:
    chunks = [json.loads(c.removeprefix(b"data: ")) for c in written.split(b"\n\n")[:-2]]
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


def test_a_stream_writes_the_annotations_after_the_text_and_opens_reasoning_first() -> None:
    more = {"service_tier": "default", "system_fingerprint": "fp_1"}
    writer = ChunkStream("deepseek-reasoner", False, completion_id="c1", more=more)
    events = [
        ThinkingDelta(0, "Hm."),
        CitationDelta(1, CITED),
        TextDelta(1, "A "),
        TextDelta(1, "is"),
        MessageComplete([], END, TokenUsage()),
    ]
    written = b"".join(writer.feed(e) for e in events)
    first = json.loads(written.split(b"\n\n")[0].removeprefix(b"data: "))
    assert list(first)[:6] == [
        "id",
        "object",
        "created",
        "model",
        "service_tier",
        "system_fingerprint",
    ]
    assert first["id"] == "c1"
    assert deltas(written) == [
        {"role": "assistant", "content": None, "reasoning_content": ""},
        {"reasoning_content": "Hm."},
        {"content": "A "},
        {"content": "is"},
        {"annotations": [ANNOTATION]},
        {},
    ]


def test_reasoning_first_names_the_role_once_before_a_tool_call() -> None:
    writer = ChunkStream("deepseek-reasoner", False)
    events = [
        ThinkingDelta(0, "Look it up."),
        ToolUseStart(1, "call_1", "find"),
        ToolUseInputDelta(1, "call_1", "{}"),
        MessageComplete([], StopReason(kind=StopKind.TOOL_USE), TokenUsage()),
    ]
    written = deltas(b"".join(writer.feed(e) for e in events))
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "find"}}
    call["function"]["arguments"] = ""
    assert written == [
        {"role": "assistant", "content": None, "reasoning_content": ""},
        {"reasoning_content": "Look it up."},
        {"tool_calls": [call]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
        {},
    ]


@pytest.mark.parametrize("legacy", [False, True])
def test_a_call_without_arguments_streams_them_as_an_empty_object(legacy: bool) -> None:
    writer = ChunkStream("gpt", False, legacy=legacy)
    events = [
        ToolUseStart(0, "call_1", "now"),
        ToolUseInputDelta(0, "call_1", ""),  # Anthropic's empty first input_json_delta
        ToolUseEnd(0, "call_1", "now", {}),
        MessageComplete([], StopReason(kind=StopKind.TOOL_USE), TokenUsage()),
    ]
    written = deltas(b"".join(writer.feed(e) for e in events))
    calls = [d.get("function_call") or d["tool_calls"][0]["function"] for d in written[:-1]]
    assert json.loads("".join(call["arguments"] for call in calls)) == {}
