"""Nova 2's system tools and citations on Bedrock Converse (docs/contract.md §11, §12).

Wire samples follow botocore's bedrock-runtime shapes (``SystemTool``, ``ToolUseBlock.type``,
``ToolResultBlock.type``, ``CitationsContentBlock``, ``ContentBlockStart``,
``ContentBlockDelta``) and https://docs.aws.amazon.com/nova/latest/userguide/tool-built-in.html.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from metis.errors import CapabilityError
from metis.model.content import Message, ServerToolCallBlock, ServerToolResultBlock, TextBlock
from metis.model.request import CanonicalRequest
from metis.model.server_tools import CodeExecution, CodeOutput, WebSearch
from metis.stages.policy.invariants import StreamChecker
from metis.wire.bedrock_converse import codec
from metis.wire.bedrock_converse.rules import converse_problems
from metis.wire.builder import MessageBuilder
from tests.helpers import recording_call

MODEL = "bedrock:us.amazon.nova-2-lite-v1:0"
CALL = {
    "toolUse": {
        "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
        "name": "nova_code_interpreter",
        "input": {"code": "print(6 * 7)"},
        "type": "server_tool_use",
    }
}
OUTPUT = {"stdOut": "42\n", "stdErr": "", "exitCode": 0, "isError": False}
RESULT = {
    "toolResult": {
        "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
        "type": "nova_code_interpreter_result",
        "status": "success",
        "content": [{"text": json.dumps(OUTPUT)}],
    }
}
CITED = {
    "citationsContent": {
        "content": [{"text": "The answer is 42."}],
        "citations": [
            {
                "title": "Answers",
                "sourceContent": [{"text": "42 is the answer"}],
                "location": {"web": {"url": "https://example.com/42", "domain": "example.com"}},
            }
        ],
    }
}
BODY = {
    "output": {"message": {"role": "assistant", "content": [CALL, RESULT, CITED]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 12, "outputTokens": 8},
}


def request(*messages: Message, model: str = MODEL, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=model, messages=list(messages) or [Message.user("hi")], max_output_tokens=64, **kw
    )


def checked(events: list[Any]) -> list[Any]:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events[-1].final_content  # type: ignore[no-any-return]


def read_body() -> list[Any]:
    return checked(list(codec.parse_body(copy.deepcopy(BODY), MessageBuilder("bedrock", MODEL))))


def read_stream() -> list[Any]:
    """What ConverseStream sends for BODY."""
    tool = {k: v for k, v in CALL["toolUse"].items() if k != "input"}
    result = {k: v for k, v in RESULT["toolResult"].items() if k != "content"}
    cited = CITED["citationsContent"]
    events: list[dict[str, Any]] = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": tool}}},
        delta(0, {"toolUse": {"input": '{"code":'}}),
        delta(0, {"toolUse": {"input": ' "print(6 * 7)"}'}}),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"contentBlockStart": {"contentBlockIndex": 1, "start": {"toolResult": result}}},
        delta(1, {"toolResult": RESULT["toolResult"]["content"]}),
        {"contentBlockStop": {"contentBlockIndex": 1}},
        delta(2, {"text": "The answer is 42."}),
        delta(2, {"citation": cited["citations"][0]}),
        {"contentBlockStop": {"contentBlockIndex": 2}},
        {"messageStop": {"stopReason": "end_turn"}},
        {"metadata": {"usage": {"inputTokens": 12, "outputTokens": 8}}},
    ]  # fmt: skip
    parser = codec.stream_parser(MessageBuilder("bedrock", MODEL))
    made = [event for obj in events for event in parser.feed(obj)]
    return checked(made + list(parser.end()))


def delta(index: int, value: dict[str, Any]) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": value}}


def test_nova_system_tools_are_declared_for_nova_2_only() -> None:
    asked = request(server_tools=[WebSearch(), CodeExecution()])
    body = codec.encode(asked, recording_call("bedrock", MODEL))
    assert body["toolConfig"]["tools"] == [
        {"systemTool": {"name": "nova_grounding"}},
        {"systemTool": {"name": "nova_code_interpreter"}},
    ]
    claude = "bedrock:anthropic.claude-sonnet-4-5"
    with pytest.raises(CapabilityError, match="only Nova 2"):
        codec.encode(
            request(model=claude, server_tools=[WebSearch()]), recording_call("bedrock", claude)
        )
    with pytest.raises(CapabilityError, match="takes no options"):
        codec.encode(
            request(server_tools=[WebSearch(max_uses=1)]), recording_call("bedrock", MODEL)
        )


def test_a_server_tool_use_is_a_server_call_never_a_call_to_run() -> None:
    whole = read_body()
    assert read_stream() == whole
    call, result, text = whole
    assert isinstance(call, ServerToolCallBlock) and call.name == "code_execution"
    assert call.input == {"code": "print(6 * 7)"} and call.id == CALL["toolUse"]["toolUseId"]
    assert isinstance(result, ServerToolResultBlock)
    assert result.code_output == CodeOutput(stdout="42\n", stderr="", exit_code=0)
    assert isinstance(text, TextBlock) and text.text == "The answer is 42."
    (cited,) = text.citations or []
    assert (cited.url, cited.title, cited.cited_text) == (
        "https://example.com/42",
        "Answers",
        "42 is the answer",
    )


def test_the_blocks_go_back_verbatim_in_the_assistant_turn_and_pass_the_rules() -> None:
    history = [Message.user("6 times 7?"), Message.assistant(*read_body()), Message.user("thanks")]
    call = recording_call("bedrock", MODEL)
    body = codec.encode(request(*history, server_tools=[CodeExecution()]), call)
    assert body["messages"][1]["content"] == [CALL, RESULT, {"text": "The answer is 42."}]
    assert converse_problems(body) == []
    assert call.dropped == []
