"""Lossy-projection warnings: logged once per session, and returned with each call's result
(``message.complete.warnings`` and ``CanonicalResponse.warnings``)."""

from __future__ import annotations

import pytest

from metis.model import CanonicalRequest, DroppedContent, Message, Role
from metis.testing.emulator import text, thinking, tools

from ..conversations import TOOLS, adapters_for, run_tool, scripted
from ..helpers import answer, lossy_warnings, make_call


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_dropped_block_is_logged_once_per_session_and_listed_with_every_result(
    streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="metis")
    replies = [
        thinking("Paris first.", tools(("get_weather", {"city": "Paris"}))),
        text("Sunny in Paris."),
        text("Still sunny."),
    ]
    adapters = adapters_for(scripted(replies), "anthropic", "openai")
    history = [Message.user("Weather in Paris?")]

    async def turn(name: str) -> list[DroppedContent]:
        nonlocal history
        request = CanonicalRequest(
            model=f"{name}:m",
            session_id="once",
            messages=history,
            tools=TOOLS,
            max_output_tokens=512,
        )
        response = await answer(adapters[name], request, streaming)
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        calls = response.tool_calls
        history.append(Message.tool(*map(run_tool, calls)) if calls else Message.user("And?"))
        return list(response.warnings)

    assert await turn("anthropic") == []
    first = await turn("openai")  # Claude's signed thinking cannot go to OpenAI
    assert [(w.block_type, w.provider, w.message_id, w.repeated) for w in first] == [
        ("thinking", "openai", "messages[1]", False)
    ]
    assert "produced by anthropic" in first[0].reason
    second = await turn("openai")  # the same drop again: listed, not logged again
    assert [(w.block_type, w.message_id, w.reason, w.repeated) for w in second] == [
        ("thinking", "messages[1]", first[0].reason, True)
    ]
    assert len([r for r in lossy_warnings(caplog) if r.block_type == "thinking"]) == 1  # type: ignore[attr-defined]


def test_without_a_session_every_call_logs_its_drops(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="metis")
    for _ in range(2):
        call = make_call(session_id=None)
        call.warn_dropped("image", "no images here", "m1")
        assert [w.repeated for w in call.warnings] == [False]
    assert len(lossy_warnings(caplog)) == 2


def test_sessions_are_warned_apart_and_a_drop_is_keyed_by_message_and_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="metis")
    make_call(session_id="a").warn_dropped("image", "no images here", "m1")
    make_call(session_id="b").warn_dropped("image", "no images here", "m1")
    call = make_call(session_id="a")
    call.request_id = "req_later"
    call.warn_dropped("image", "no images here", "m1")
    call.warn_dropped("image", "no images here", "m2")
    call.warn_dropped("image", "another reason", "m1")
    assert [w.repeated for w in call.warnings] == [True, False, False]
    assert len(lossy_warnings(caplog)) == 4


def test_message_complete_to_dict_lists_its_warnings() -> None:
    from metis.model import MessageComplete, StopKind, StopReason, TokenUsage

    event = MessageComplete([], StopReason(kind=StopKind.END_TURN), TokenUsage())
    event.warnings = [DroppedContent(block_type="image", reason="r", provider="p")]
    assert event.to_dict()["warnings"] == [
        {
            "block_type": "image",
            "reason": "r",
            "provider": "p",
            "message_id": None,
            "repeated": False,
        }
    ]


def test_one_call_may_give_the_same_warning_for_several_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="metis")
    call = make_call(session_id="several")
    for _ in range(3):
        call.warn_dropped("server_tool_use", "no canonical form", "msg_1")
    assert [w.repeated for w in call.warnings] == [False, False, False]
    assert len(lossy_warnings(caplog)) == 3


def test_extra_fields_of_any_kind_are_part_of_what_makes_a_drop_the_same() -> None:
    call = make_call(session_id="extras")
    call.warn_dropped("image", "r", "m1", where={"part": 1})
    call.warn_dropped("image", "r", "m1", where={"part": 2})
    later = make_call(session_id="extras")
    later.request_id = "req_later"
    later.warn_dropped("image", "r", "m1", where={"part": 1})
    assert [w.repeated for w in [*call.warnings, *later.warnings]] == [False, False, True]


def test_the_record_says_which_message_so_two_drops_of_one_kind_read_apart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A conversation moved to another provider drops the thinking of each earlier reply: one
    record per message, and the text says which (two lines that read the same look like a
    duplicate)."""
    caplog.set_level("WARNING", logger="metis")
    call = make_call(session_id="apart")
    call.warn_dropped("thinking", "it was produced by anthropic", "messages[1]")
    call.warn_dropped("thinking", "it was produced by anthropic", "messages[3]")
    call.warn_dropped("tool.strict", "no strict tool use")
    assert [r.getMessage() for r in lossy_warnings(caplog)] == [
        f"dropped thinking at messages[1] for {call.provider}: it was produced by anthropic",
        f"dropped thinking at messages[3] for {call.provider}: it was produced by anthropic",
        f"dropped tool.strict for {call.provider}: no strict tool use",
    ]
