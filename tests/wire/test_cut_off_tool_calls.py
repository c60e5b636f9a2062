"""A tool call cut off by the output limit (docs/contract.md §2): with the stop reason
``max_tokens`` and arguments that are unfinished (or none at all), the call is marked
incomplete (``input_error``), never a complete call with empty input; on every stack, streamed
and whole, with each provider's wire shapes. ``run_tools`` refuses to run it and says why."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

import metis
from metis.model.content import ToolResultBlock, ToolUseBlock
from metis.model.events import MessageComplete, ToolUseEnd
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import OUTPUT_LIMIT_ARGUMENTS as CUT_OFF
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec


def _codec(stack: str) -> Any:
    config = load_stack(stack)
    return get_codec(config.codec, config.codec_settings)


def _read(stack: str, wire: list[dict[str, Any]] | dict[str, Any]) -> MessageComplete:
    builder = MessageBuilder(stack, f"{stack}:m")
    if isinstance(wire, dict):
        events = list(_codec(stack).parse_body(wire, builder))
    else:
        parser = _codec(stack).stream_parser(builder)
        events = [event for obj in wire for event in parser.feed(obj)]
        events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    final = events[-1]
    assert isinstance(final, MessageComplete)
    calls = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert [e.input_error for e in ends] == [c.input_error for c in calls]  # streamed as kept
    return final


def _anthropic_stream(arguments: list[str]) -> list[dict[str, Any]]:
    start = {"id": "msg_1", "model": "m", "usage": {"input_tokens": 9, "output_tokens": 1}}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": tool},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            for piece in arguments
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens"},
            "usage": {"output_tokens": 64},
        },
        {"type": "message_stop"},
    ]


def _invoke_chunk(event: dict[str, Any]) -> dict[str, Any]:
    """An event as Bedrock's InvokeModelWithResponseStream frames it."""
    return {"chunk": {"bytes": base64.b64encode(json.dumps(event).encode()).decode()}}


ANTHROPIC_WHOLE = {  # the whole body: the API sends the cut-off call with an empty input
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}],
    "stop_reason": "max_tokens",
    "usage": {"input_tokens": 9, "output_tokens": 64},
}


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _chat_call(arguments: str, **head: Any) -> dict[str, Any]:
    return {"index": 0, **head, "function": {"arguments": arguments, **head.pop("function", {})}}


CHAT_STREAM = [
    _chat_chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": ""},
                }
            ],
        }
    ),
    _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a.py", '}}]}),
    _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"text": "imp'}}]}),
    _chat_chunk({}, "length"),
]
CHAT_WHOLE = {
    "id": "chatcmpl-1",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "length",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": '{"path": "a.py", "te'},
                    }
                ],
            },
        }
    ],
}


def _responses(status: str, *output: dict[str, Any]) -> dict[str, Any]:
    response = {"id": "resp_1", "model": "m", "status": status, "output": list(output)}
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return response


RESPONSES_CALL = {
    "id": "fc_1",
    "type": "function_call",
    "status": "incomplete",
    "call_id": "call_1",
    "name": "write_file",
    "arguments": '{"path": "a.py", "te',
}
RESPONSES_STREAM = [
    {"type": "response.created", "response": _responses("in_progress")},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**RESPONSES_CALL, "status": "in_progress", "arguments": ""},
    },
    {
        "type": "response.function_call_arguments.delta",
        "output_index": 0,
        "item_id": "fc_1",
        "delta": '{"path": "a.py", "te',
    },
    {"type": "response.output_item.done", "output_index": 0, "item": RESPONSES_CALL},
    {"type": "response.incomplete", "response": _responses("incomplete", RESPONSES_CALL)},
]


def _converse_delta(value: dict[str, Any]) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": 0, "delta": value}}


CONVERSE_STREAM = [
    {"messageStart": {"role": "assistant"}},
    {
        "contentBlockStart": {
            "contentBlockIndex": 0,
            "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "write_file"}},
        }
    },
    _converse_delta({"toolUse": {"input": '{"path": "a.py", '}}),
    _converse_delta({"toolUse": {"input": '"text": "imp'}}),
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "max_tokens"}},
    {"metadata": {"usage": {"inputTokens": 9, "outputTokens": 64, "totalTokens": 73}}},
]
CONVERSE_WHOLE = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "write_file", "input": {}}}],
        }
    },
    "stopReason": "max_tokens",
    "usage": {"inputTokens": 9, "outputTokens": 64, "totalTokens": 73},
}
GEMINI_CHUNK = {  # Gemini sends a call whole; cut off, it comes with no arguments
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"functionCall": {"name": "write_file"}}]},
            "finishReason": "MAX_TOKENS",
        }
    ],
    "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 64},
}
OLLAMA_LINE = {
    "model": "m",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "write_file", "arguments": {}}}],
    },
    "done": True,
    "done_reason": "length",
}

CASES: dict[str, tuple[str, Any]] = {
    "anthropic-streamed": ("anthropic", _anthropic_stream(['{"path": "a.py", ', '"text": "imp'])),
    "anthropic-streamed-no-arguments-yet": ("anthropic", _anthropic_stream([])),
    "anthropic-whole": ("anthropic", ANTHROPIC_WHOLE),
    "bedrock_anthropic-streamed": (
        "bedrock_anthropic",
        [_invoke_chunk(e) for e in _anthropic_stream(['{"path": "a.py", ', '"te'])],
    ),
    "bedrock_anthropic-whole": ("bedrock_anthropic", ANTHROPIC_WHOLE),
    "openai-streamed": ("openai", CHAT_STREAM),
    "openai-whole": ("openai", CHAT_WHOLE),
    "openai_responses-streamed": ("openai_responses", RESPONSES_STREAM),
    "openai_responses-whole": ("openai_responses", _responses("incomplete", RESPONSES_CALL)),
    "bedrock-streamed": ("bedrock", CONVERSE_STREAM),
    "bedrock-whole": ("bedrock", CONVERSE_WHOLE),
    "gemini-streamed": ("gemini", [GEMINI_CHUNK]),
    "gemini-whole": ("gemini", GEMINI_CHUNK),
    "ollama-streamed": ("ollama", [OLLAMA_LINE]),
    "ollama-whole": ("ollama", OLLAMA_LINE),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_call_cut_off_by_the_output_limit_is_marked_incomplete(case: str) -> None:
    stack, wire = CASES[case]
    final = _read(stack, wire)
    assert final.stop_reason.kind is StopKind.MAX_TOKENS
    (call,) = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert call.name == "write_file" and call.input_error == CUT_OFF


def test_a_whole_call_before_the_cut_off_one_stays_whole() -> None:
    first = ['{"path": "a.py"}']
    wire = _anthropic_stream(first)
    second = [dict(e, index=1) for e in wire[1:4]]  # another call, cut off after its first piece
    second[0] = {**second[0], "content_block": {**second[0]["content_block"], "id": "toolu_2"}}
    final = _read("anthropic", [*wire[:4], *second, *wire[4:]])
    calls = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert [c.input_error for c in calls] == [None, None]  # the second parsed: {"path": "a.py"}
    cut = _anthropic_stream(['{"path": "b.py", "te'])
    cut_second = [dict(e, index=1) for e in cut[1:4]]
    cut_second[0] = {
        **cut_second[0],
        "content_block": {**cut_second[0]["content_block"], "id": "toolu_2"},
    }
    final = _read("anthropic", [*wire[:4], *cut_second, *wire[4:]])
    calls = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert [c.input_error for c in calls] == [None, CUT_OFF]
    assert calls[0].input == {"path": "a.py"}


def test_a_tool_of_no_arguments_ending_the_turn_is_whole() -> None:
    wire = _anthropic_stream([])
    wire[-2] = {**wire[-2], "delta": {"stop_reason": "tool_use"}}
    final = _read("anthropic", wire)
    (call,) = [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert call.input == {} and call.input_error is None


def test_run_tools_refuses_a_cut_off_call_and_says_why() -> None:
    ran: list[Any] = []

    def write_file(path: str, text: str) -> str:
        ran.append(path)
        return "written"

    final = _read("openai", CHAT_STREAM)
    reply = CanonicalResponse(
        request_id="r",
        model="openai:m",
        provider="openai",
        content=final.final_content,
        stop_reason=StopReason(kind=StopKind.MAX_TOKENS, raw="length"),
        usage=TokenUsage(),
        latency_ms=0,
    )
    (result,) = metis.run_tools(reply, [write_file]).content
    assert isinstance(result, ToolResultBlock) and result.is_error and ran == []
    assert result.content == f"write_file was not run: {CUT_OFF}"
    assert json.dumps(result.content)  # plain text the model can read
