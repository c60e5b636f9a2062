"""pre_send_check's Converse rules: what Bedrock would refuse is reported, all at once, unsent."""

from __future__ import annotations

from typing import Any

from metis.wire.rules import RULES

TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {}}}}]}


def problems(messages: list[dict[str, Any]], **body: Any) -> list[str]:
    return RULES["bedrock_converse"]({"messages": messages, **body})


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


USE = {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {}}}
RESULT = {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "ok"}]}}


def test_a_good_tool_loop_has_no_problems() -> None:
    messages = [user({"text": "hi"}), assistant(USE), user(RESULT, {"text": "and?"})]
    assert problems(messages, toolConfig=TOOLS) == []


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        [
            assistant({"text": " "}),
            assistant({"toolUse": {"toolUseId": "bad id!", "input": {}}}),
            user({"text": "no results"}),
            user(),
        ],
        toolConfig={"tools": [{"toolSpec": {"name": "has space"}}]},
    )
    joined = "\n".join(found)
    for expected in [
        "must start with a user message",
        "must alternate between user and assistant roles",
        "non-whitespace text",
        "characters Bedrock refuses",
        "Expected toolResult blocks at messages.2.content for the following Ids: bad id!",
        "content must not be empty",
        "tool name 'has space'",
    ]:
        assert expected in joined, expected


def test_tool_blocks_need_a_tool_config_and_results_need_a_call() -> None:
    found = problems([user({"text": "hi"}), assistant(USE)])
    assert "The toolConfig field must be defined when using toolUse and toolResult" in found[0]
    assert found[0].endswith(
        "give the request the tools they called, tools=[...], as the call that made them had)"
    )  # a stored history sent with no tools: the fix, in metis's words
    assert any("toolUse ids ['tooluse_1'] are never answered" in p for p in found)
    stray = problems([user(RESULT)], toolConfig=TOOLS)
    assert stray == [
        "messages.0: The toolResult blocks at messages.0.content contain toolUseIds that do not "
        "match the toolUse blocks of the previous turn."
    ]


def test_claude_on_invoke_model_uses_anthropics_rules() -> None:
    blank = [{"type": "text", "text": " "}]
    found = RULES["bedrock_anthropic"]({"messages": [{"role": "user", "content": blank}]})
    assert any("must contain non-whitespace text" in p for p in found)
