"""pre_send_check: everything a provider would refuse, found before the request is sent."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import InvalidRequestError, StackError
from metis.pipeline.request import WireRequest
from metis.stages.edits.pre_send_check import PreSendCheck
from metis.wire.rules import anthropic_problems, openai_chat_problems

from ..fakes import FakePeer, collect, request
from ..helpers import make_call


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


TEXT = {"type": "text", "text": "hi"}
USE = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
SEARCH_USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}


def test_a_valid_anthropic_history_has_no_problems() -> None:
    body = {
        "messages": [
            user(TEXT),
            assistant(SEARCH_USE, SEARCH_RESULT, TEXT, USE),
            user(RESULT, TEXT),
        ],
        "tools": [{"name": "f"}],
    }
    assert anthropic_problems(body) == []


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([user(TEXT), user(TEXT)], "roles must alternate"),
        (
            [user(TEXT), assistant(USE), user(TEXT)],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after",
        ),
        ([user(RESULT)], "messages.0.content.0: unexpected `tool_use_id` found"),
        ([user(TEXT), assistant(USE), user(TEXT, RESULT)], "`tool_result` blocks must come first"),
        ([user({"type": "text", "text": "  "})], "non-whitespace text"),
        (
            [user(TEXT), assistant({"type": "thinking", "thinking": "x"})],
            "must carry their signature",
        ),
        ([user(TEXT), assistant({**USE, "id": "tu 1"})], "characters Anthropic refuses"),
        ([user(TEXT), assistant(USE)], "without `tool_result` blocks immediately after: toolu_1"),
        ([user(TEXT), {"role": "system", "content": "x"}], "role must be user or assistant"),
        (
            [user(TEXT), assistant(SEARCH_USE, TEXT), user(TEXT), assistant(SEARCH_RESULT)],
            "messages.3.content.0: `web_search_tool_result` block(s) provided when the message "
            "does not have a corresponding `server_tool_use` block with id 'srvtoolu_1' before it",
        ),
        (
            [user(TEXT), assistant(SEARCH_RESULT, SEARCH_USE)],
            "messages.1.content.0: `web_search_tool_result` block(s) provided",
        ),
        ([user(SEARCH_USE, SEARCH_RESULT)], "messages.0.content.1: `web_search_tool_result`"),
    ],
)
def test_each_anthropic_rule(messages: list[dict[str, Any]], expected: str) -> None:
    problems = anthropic_problems({"messages": messages})
    assert any(expected in p for p in problems), problems


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "user", "content": "x"},
            ],
            "must be followed by tool messages",
        ),
        (
            [{"role": "tool", "tool_call_id": "call_9", "content": "x"}],
            "messages.[0].role: Invalid parameter: messages with role 'tool' must be a response",
        ),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_9", "content": "x"},
            ],
            "messages.[1].tool_call_id: Invalid parameter: 'tool_call_id' of 'call_9' not found",
        ),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": "c" * 41}]},
                {"role": "tool", "tool_call_id": "c" * 41, "content": "x"},
            ],
            "longer than 40",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "[1]"}}],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            ],
            "JSON object string",
        ),
        ([{"role": "user", "content": ""}], "content must not be empty"),
        (
            [{"role": "assistant", "content": None, "tool_calls": [CALL]}],
            "The following tool_call_ids did not have response messages: call_1",
        ),
    ],
)
def test_each_openai_rule(messages: list[dict[str, Any]], expected: str) -> None:
    problems = openai_chat_problems({"messages": messages})
    assert any(expected in p for p in problems), problems


def test_tool_names_are_checked() -> None:
    body = {"messages": [user(TEXT)], "tools": [{"name": "has space"}, {"name": "x" * 65}]}
    assert len(anthropic_problems(body)) == 2


def test_every_problem_is_reported_at_once() -> None:
    body = {"messages": [user({"type": "text", "text": ""}), user(TEXT), assistant(USE)]}
    wire = WireRequest(url="http://x", body=body)
    with pytest.raises(InvalidRequestError) as caught:
        PreSendCheck(rules="anthropic").rewrite(wire, make_call())
    message = str(caught.value)
    assert "problems" in message
    for expected in ("alternate", "non-whitespace", "without `tool_result`"):
        assert expected in message
    assert caught.value.retryable is False


def test_an_unknown_rule_set_is_refused_when_the_stack_is_built() -> None:
    with pytest.raises(StackError, match="unknown rule set 'gemni'"):
        PreSendCheck(rules="gemni")


@pytest.mark.anyio
async def test_a_broken_history_never_reaches_the_network() -> None:
    from metis.model import Message, ToolResultBlock

    peer = FakePeer()
    adapter = peer.adapter("openai")
    adapter.pipeline.remove("tool_result_check")  # so the wire check is the one that sees it
    broken = request(
        "openai",
        messages=[
            Message.user("hi"),
            Message.tool(ToolResultBlock(tool_use_id="tu_x", content="?")),
        ],
    )
    with pytest.raises(InvalidRequestError, match="must be a response to a preceeding message"):
        await collect(adapter, broken)
    assert peer.requests == []


@pytest.mark.parametrize(
    ("rules", "body", "expected"),
    [
        (
            "openai_responses",
            {"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]},
            "No tool call found for function call output with call_id c1",
        ),
        (
            "openai_responses",
            {"input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]},
            "No tool output found for function call c1",
        ),
        (
            "openai_responses",
            {"input": [{"type": "reasoning", "id": "r1"}]},
            "Item 'r1' of type 'reasoning' was provided without its required following item",
        ),
        (
            "openai_responses",
            {
                "input": [
                    {"type": "reasoning", "summary": [], "encrypted_content": "x"},
                    {"type": "message", "role": "assistant", "id": "msg_1", "content": "4"},
                ]
            },
            "Item 'msg_1' of type 'message' was provided without its required 'reasoning' item",
        ),
        (
            "openai_responses",
            {"input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]},
            "cannot be output_text",
        ),
        (
            "gemini",
            {
                "contents": [
                    {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                    {"role": "user", "parts": [{"text": "hi"}]},
                ]
            },
            "must answer the previous turn",
        ),
        (
            "gemini",
            {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
            "role must be user or model",
        ),
        ("gemini", {"contents": [{"role": "user", "parts": [{"text": ""}]}]}, "empty text"),
        (
            "gemini",
            {"contents": [{"role": "user", "parts": [{"text": "a", "fileData": {}}]}]},
            "contents[0].parts[0].data: oneof field 'data' is already set. Cannot set 'fileData'",
        ),
        ("gemini", {"contents": [{"role": "user", "parts": [{}]}]}, "required oneof field 'data'"),
        (
            "gemini",
            {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f"}}]}]},
            "function call turn comes immediately after a user turn",
        ),
        (
            "gemini",
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "hi"}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "f"}}] * 2},
                ]
            },
            "the number of function response parts is equal to the number of function call parts",
        ),
        (
            "ollama",
            {"messages": [{"role": "tool", "tool_name": "f", "content": "x"}]},
            "never called",
        ),
        (
            "ollama",
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                    }
                ]
            },
            "must be an object",
        ),
    ],
)
def test_each_other_providers_rules(rules: str, body: dict[str, Any], expected: str) -> None:
    from metis.wire.rules import RULES

    problems = RULES[rules](body)
    assert any(expected in p for p in problems), problems


def test_a_chosen_function_is_one_of_the_tools() -> None:
    from metis.wire.rules import RULES

    chat = {
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": {"type": "function", "function": {"name": "g"}},
    }
    assert RULES["openai_chat"](chat) == [
        "tool_choice: Invalid value for 'tool_choice': function 'g' is not present in 'tools'."
    ]
    responses = {
        "input": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "name": "f", "parameters": {}}],
        "tool_choice": {"type": "function", "name": "g"},
    }
    assert RULES["openai_responses"](responses) == [
        "tool_choice: Tool choice 'g' not found in 'tools' parameter."
    ]
    responses["tool_choice"] = {"type": "function", "name": "f"}
    assert RULES["openai_responses"](responses) == []


def test_a_continued_responses_request_may_answer_calls_made_earlier() -> None:
    from metis.wire.rules import openai_responses_problems

    body = {
        "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}],
    }
    assert openai_responses_problems(body) == []
