"""Z.ai's Chat Completions streams, read by the ``zai`` stack's codec. Its GLM Coding Plan
endpoint (``/api/coding/paas/v4/chat/completions``, glm-4.5-air and glm-4.6 in October 2025, as
charmbracelet/crush's recorded agent runs show) numbers a stream's one choice by the part of
the reply it carries: ``index`` 0 for the reasoning, 1 for the text, 2 for the tool calls, and
the next one for the chunk with the ``finish_reason`` and the usage. metis asks for one choice
(it never sends ``n``), so every chunk's first choice is the reply's."""

from __future__ import annotations

from typing import Any

from metis.model.content import TextBlock, ThinkingBlock, ToolUseBlock
from metis.model.events import MessageComplete
from metis.model.response import StopKind
from metis.wire.builder import MessageBuilder
from tests.helpers import checked_final, stack_codec


def read_stream(chunks: list[dict[str, Any]]) -> MessageComplete:
    parser = stack_codec("zai").stream_parser(MessageBuilder("zai", "zai:glm-4.6"))
    events = [event for obj in chunks for event in parser.feed(obj)]
    final: MessageComplete = checked_final(events + list(parser.end()))
    return final


def chunk(index: int, delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
    choice = {"index": index, "delta": {"role": "assistant", **delta}, **extra}
    return {"id": "202510272050", "created": 1761569412, "model": "glm-4.6", "choices": [choice]}


CALL = {"id": "call_41e6", "index": 0, "type": "function",
        "function": {"name": "bash", "arguments": '{"command":"echo hi > test.txt"}'}}  # fmt: skip
USAGE = {"prompt_tokens": 10640, "completion_tokens": 40, "total_tokens": 10680,
         "prompt_tokens_details": {"cached_tokens": 10595}}  # fmt: skip


def test_a_stream_numbering_its_choice_by_part_reads_whole() -> None:
    last = chunk(3, {"content": ""}, finish_reason="tool_calls")
    final = read_stream(
        [
            chunk(0, {"reasoning_content": "Run bash."}),
            chunk(1, {"content": "Creating it."}),
            chunk(2, {"tool_calls": [CALL]}),
            {**last, "usage": USAGE},
        ]
    )
    thinking, text, call = final.final_content
    assert isinstance(thinking, ThinkingBlock) and thinking.thinking == "Run bash."
    assert text == TextBlock(text="Creating it.")
    assert isinstance(call, ToolUseBlock)
    assert (call.name, call.input) == ("bash", {"command": "echo hi > test.txt"})
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.TOOL_USE, "tool_calls")
    assert (final.usage.input_tokens, final.usage.cached_input_tokens) == (45, 10595)


def test_a_text_reply_ends_with_the_finish_reason_of_its_next_index() -> None:
    final = read_stream(
        [
            chunk(0, {"content": "Create"}),
            chunk(0, {"content": " bash file"}),
            chunk(1, {"content": ""}, finish_reason="length"),
        ]
    )
    assert final.final_content == [TextBlock(text="Create bash file")]
    assert (final.stop_reason.kind, final.stop_reason.raw) == (StopKind.MAX_TOKENS, "length")
