"""What a reply reads as: its text, and the reasoning it shows."""

from __future__ import annotations

import pytest

import metis
from metis.model import CanonicalResponse, TextBlock, ThinkingBlock, TokenUsage
from metis.model.response import StopKind, StopReason
from metis.testing.emulator import Emulator


def _reply(*content: TextBlock | ThinkingBlock) -> CanonicalResponse:
    return CanonicalResponse(
        request_id="r",
        model="anthropic:claude-sonnet-4-5",
        provider="anthropic",
        content=list(content),
        stop_reason=StopReason(kind=StopKind.END_TURN, raw="end_turn"),
        usage=TokenUsage(),
        latency_ms=0,
    )


def test_the_reasoning_shown_is_the_thinking_blocks_joined() -> None:
    reply = _reply(
        ThinkingBlock(thinking="First, 2 and 2.", signature="s"),
        ThinkingBlock(thinking="So 4."),
        TextBlock(text="4"),
    )
    assert reply.thinking == "First, 2 and 2.\n\nSo 4."
    assert reply.text == "4"
    assert _reply(TextBlock(text="4")).thinking == ""


def test_a_reply_asked_to_reason_shows_it(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    reply = metis.complete("anthropic:claude-sonnet-4-5", "2+2?", reasoning=2000)
    assert reply.thinking and reply.thinking in {
        b.thinking for b in reply.content if isinstance(b, ThinkingBlock)
    }


def test_a_message_of_the_history_reads_as_its_reply_did() -> None:
    """Before, a restored session's ``messages[-1].thinking`` (or ``.tool_calls``) was an
    AttributeError: only the reply (``CanonicalResponse``) had them."""
    call = metis.ToolUseBlock(id="tu_1", name="lookup", input={"key": "a"})
    thought = ThinkingBlock(thinking="Look it up.")
    reply = _reply(thought).model_copy(update={"content": [thought, call]})
    message = reply.message
    assert message.thinking == reply.thinking == "Look it up."
    assert message.tool_calls == reply.tool_calls == [call]
    assert metis.Message.user("hi").thinking == "" and metis.Message.user("hi").tool_calls == []
