"""The stream writers' per-event templates (text, thinking and tool-argument deltas) write
byte for byte what encoding the whole event object writes (``sse.event``/``sse.data``), for
any text: quotes, backslashes, control characters, line separators, non-ASCII."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from metis.gateway.anthropic_write import MessageStream
from metis.gateway.chat_write import ChunkStream
from metis.gateway.inbound import Inbound
from metis.gateway.responses_api import ResponseStream
from metis.gateway.sse import data, event
from metis.model.events import TextDelta, ThinkingDelta, ToolUseInputDelta, ToolUseStart

TRICKY = ['say "hi"\\n', "a\nb\r\tc\x00\x1f", "\u2028\u2029 é 漢字 🙂", "</script>", "\x7f"]
texts = st.one_of(st.sampled_from(TRICKY), st.text(min_size=1))


def last_event(written: bytes) -> bytes:
    return written.split(b"\n\n")[-2] + b"\n\n"


def data_of(framed: bytes) -> Any:
    return json.loads(framed.split(b"data: ", 1)[1])


@settings(deadline=None)  # a loaded machine is no reason to fail
@given(text=texts, thinking=texts, arguments=texts)
def test_messages_deltas_are_the_encoded_event(text: str, thinking: str, arguments: str) -> None:
    writer = MessageStream("claude")
    got = last_event(writer.feed(TextDelta(0, text)))
    delta = {"type": "text_delta", "text": text}
    expected = {"type": "content_block_delta", "index": 0, "delta": delta}
    assert got == event("content_block_delta", expected)
    got = last_event(writer.feed(ThinkingDelta(1, thinking)))
    delta = {"type": "thinking_delta", "thinking": thinking}
    assert got == event("content_block_delta", {**expected, "index": 1, "delta": delta})
    writer.feed(ToolUseStart(2, "toolu_1", "f"))
    got = writer.feed(ToolUseInputDelta(2, "toolu_1", arguments))
    delta = {"type": "input_json_delta", "partial_json": arguments}
    assert got == event("content_block_delta", {**expected, "index": 2, "delta": delta})


@settings(deadline=None)  # a loaded machine is no reason to fail
@given(text=texts, thinking=texts, arguments=texts, include_usage=st.booleans())
def test_chat_chunks_are_the_encoded_chunk(
    text: str, thinking: str, arguments: str, include_usage: bool
) -> None:
    writer = ChunkStream("gpt", include_usage)
    writer.feed(ToolUseStart(0, "call_0", "f"))
    writer.feed(ToolUseInputDelta(0, "call_0", "{}"))

    def chunk(delta: dict[str, Any]) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        body: dict[str, Any] = {**writer.base, "choices": [choice]}
        if include_usage:
            body["usage"] = None
        return data(body)

    assert writer.feed(TextDelta(1, text)) == chunk({"content": text})
    assert writer.feed(ThinkingDelta(2, thinking)) == chunk({"reasoning_content": thinking})
    writer.feed(ToolUseStart(3, "call_1", "g"))
    got = writer.feed(ToolUseInputDelta(3, "call_1", arguments))
    fragment = {"index": 1, "function": {"arguments": arguments}}
    assert got == chunk({"tool_calls": [fragment]})
    assert data_of(got)["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == (
        arguments
    )


@settings(deadline=None)  # a loaded machine is no reason to fail
@given(text=texts, thinking=texts, arguments=texts)
def test_responses_deltas_are_the_encoded_event(text: str, thinking: str, arguments: str) -> None:
    summarized = Inbound(model="m", messages=[], options={"reasoning": {"summary": "auto"}})
    writer = ResponseStream(summarized, "m", "resp_1")
    writer.feed(TextDelta(0, "first"))
    sequence = writer.sequence
    got = writer.feed(TextDelta(0, text))
    name = "response.output_text.delta"
    where = {"item_id": writer.item["id"], "output_index": 0}
    fields = {"type": name, "sequence_number": sequence, **where, "content_index": 0}
    assert got == event(name, {**fields, "delta": text, "logprobs": []})
    got = last_event(writer.feed(ThinkingDelta(1, thinking)))
    name = "response.reasoning_summary_text.delta"
    where = {"item_id": writer.item["id"], "output_index": 1, "summary_index": 0}
    fields = {"type": name, "sequence_number": writer.sequence - 1, **where}
    assert got == event(name, {**fields, "delta": thinking})
    writer.feed(ToolUseStart(2, "call_1", "g"))
    got = writer.feed(ToolUseInputDelta(2, "call_1", arguments))
    name = "response.function_call_arguments.delta"
    where = {"item_id": writer.item["id"], "output_index": 2}
    fields = {"type": name, "sequence_number": writer.sequence - 1, **where}
    assert got == event(name, {**fields, "delta": arguments})
    assert "".join(writer.buffer) == arguments
