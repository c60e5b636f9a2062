"""thinking_turn (issue 12 item 1): with thinking on, Anthropic refuses a request whose tool
loop in progress opened without a thinking block (400 "a final `assistant` message must start
with a thinking block"); such a request goes without thinking, with one WARN, until the loop
closes."""

from __future__ import annotations

from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.model import (
    CanonicalRequest,
    Message,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.request import WireRequest
from metis.stages.edits.thinking_turn import ThinkingTurn
from metis.testing.emulator import Emulator
from metis.wire.rules import anthropic_problems

from ..helpers import lossy_warnings, make_call

THINK = {"type": "thinking", "thinking": "Let me check.", "signature": "EqQBCgIYAhIM"}
USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
USE2 = {**USE, "id": "toolu_02"}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_01", "content": "15 C"}
RESULT2 = {**RESULT, "tool_use_id": "toolu_02"}
SAY = {"type": "text", "text": "Checking."}


def wire(*messages: dict[str, Any]) -> WireRequest:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "Weather in Paris?"}, *messages],
    }
    return WireRequest(url="http://test/v1/messages", body=body)


def a(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def u(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def test_a_loop_that_opened_without_thinking_is_sent_without_thinking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="metis")
    request = wire(a(SAY, USE), u(RESULT))
    assert any("must start with a thinking block" in p for p in anthropic_problems(request.body))
    out = ThinkingTurn().rewrite(request, make_call())
    assert "thinking" not in out.body and anthropic_problems(out.body) == []
    assert "thinking" in request.body  # the request it was given is left as it was
    (record,) = lossy_warnings(caplog)
    assert record.block_type == "thinking" and record.message_id == "messages.1"  # type: ignore[attr-defined]
    assert "tool loop in progress began without a thinking block" in record.reason  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "messages",
    [
        [a(THINK, USE), u(RESULT)],  # the loop opened with thinking
        [a(THINK, USE), u(RESULT), a(USE2), u(RESULT2)],  # later steps need none of their own
        [a({"type": "redacted_thinking", "data": "EmwKAhgB"}, USE), u(RESULT)],
        [a(SAY, USE), u(RESULT), a(SAY), u({"type": "text", "text": "And Rome?"})],  # closed
        [],
    ],
)
def test_thinking_stays_on_where_the_api_accepts_it(messages: list[dict[str, Any]]) -> None:
    request = wire(*messages)
    assert anthropic_problems(request.body) == []
    assert ThinkingTurn().rewrite(request, make_call()) is request


def test_without_thinking_nothing_changes() -> None:
    request = wire(a(SAY, USE), u(RESULT))
    request.body.pop("thinking")
    assert ThinkingTurn().rewrite(request, make_call()) is request


WEATHER = ToolDefinition(
    name="get_weather",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.mark.anyio
async def test_a_loop_begun_elsewhere_finishes_on_claude_then_thinking_returns(
    emulator: Emulator,
) -> None:
    """A tool call made by another provider, answered, then sent to Claude with thinking on:
    the emulator refuses thinking there as the API does, so the call goes without it and says
    so; once the loop is closed, the next request thinks again."""
    claude = build_adapter(
        "anthropic", AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"))
    )
    call = ToolUseBlock(id="tu_01JFOREIGN", name="get_weather", input={"city": "Paris"})
    history = [
        Message.user("What's the weather in Paris?"),
        Message.assistant("Let me look.", call),
        Message.tool(ToolResultBlock(tool_use_id=call.id, content="15 C, clear")),
    ]

    def ask(messages: list[Message]) -> CanonicalRequest:
        return CanonicalRequest(
            model="anthropic:claude-sonnet-4-5",
            session_id="loop-from-elsewhere",
            messages=messages,
            tools=[WEATHER],
            max_output_tokens=4096,
            thinking=ThinkingConfig(budget_tokens=2048),
        )

    finished = await claude.complete(ask(history))
    assert "thinking" not in emulator.requests[-1].json()
    assert [(w.block_type, w.repeated) for w in finished.warnings] == [("thinking", False)]
    assert finished.content[0].type == "text"  # no thinking on this reply

    history += [Message.assistant(*finished.content), Message.user("And in Rome?")]
    fresh = await claude.complete(ask(history))
    assert emulator.requests[-1].json()["thinking"]["type"] == "enabled"
    assert fresh.warnings == [] and fresh.content[0].type == "thinking"
    await claude.aclose()
