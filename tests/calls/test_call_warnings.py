"""Lossy-projection warnings: one line per kind of drop, once per session, and returned with
each call's result (``message.complete.warnings`` and ``CanonicalResponse.warnings``)."""

from __future__ import annotations

from typing import Any

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


def test_sessions_are_warned_apart_and_a_drop_is_logged_by_its_kind_not_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A kind of drop logged on an earlier turn is not logged again for a new message, but
    that message's drop is new, not ``repeated`` (a caller listing the turn's new drops, as
    the gateway's header does, shows it)."""
    caplog.set_level("WARNING", logger="metis")
    make_call(session_id="a").warn_dropped("image", "no images here", "m1")
    make_call(session_id="b").warn_dropped("image", "no images here", "m1")
    call = make_call(session_id="a")
    call.request_id = "req_later"
    call.warn_dropped("image", "no images here", "m1")
    call.warn_dropped("image", "no images here", "m2")  # a new message, the same kind of drop
    call.warn_dropped("image", "another reason", "m1")
    assert [w.repeated for w in call.warnings] == [True, False, False]
    assert [w.message_id for w in call.warnings] == ["m1", "m2", "m1"]
    assert len(lossy_warnings(caplog)) == 3
    again = make_call(session_id="a")
    again.request_id = "req_again"
    again.warn_dropped("image", "no images here", "m2")
    assert [w.repeated for w in again.warnings] == [True]
    assert len(lossy_warnings(caplog)) == 3


def test_without_a_session_a_drop_the_model_settles_is_logged_once_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A setting the model does not take (no message holds it) is the same drop on every
    call: logged once for the model, listed with each call's result all the same (the
    gateway reports each request's drops)."""
    caplog.set_level("WARNING", logger="metis")
    calls = [make_call(session_id=None) for _ in range(3)]
    for n, call in enumerate(calls):
        call.request_id = f"req_settled_{n}"
        call.warn_dropped("reasoning", "the model does not reason (a settled drop test)")
    assert [w.repeated for call in calls for w in call.warnings] == [False, False, False]
    assert len(lossy_warnings(caplog)) == 1


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


def test_one_call_logs_one_line_for_several_blocks_of_one_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="metis")
    call = make_call(session_id="several")
    for _ in range(3):
        call.warn_dropped("server_tool_use", "no canonical form", "msg_1")
    assert [w.repeated for w in call.warnings] == [False, False, False]
    assert len(lossy_warnings(caplog)) == 1


def test_extra_fields_of_any_kind_are_part_of_what_makes_a_drop_the_same() -> None:
    call = make_call(session_id="extras")
    call.warn_dropped("image", "r", "m1", where={"part": 1})
    call.warn_dropped("image", "r", "m1", where={"part": 2})
    later = make_call(session_id="extras")
    later.request_id = "req_later"
    later.warn_dropped("image", "r", "m1", where={"part": 1})
    assert [w.repeated for w in [*call.warnings, *later.warnings]] == [False, False, True]


def test_one_line_per_kind_of_drop_naming_the_first_message_every_drop_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A conversation moved to another provider drops the thinking of each earlier reply:
    one record for the kind (the first message it was found in), not one per message; the
    call's warnings list each."""
    caplog.set_level("WARNING", logger="metis")
    call = make_call(session_id="apart")
    call.warn_dropped("thinking", "it was produced by anthropic", "messages[1]")
    call.warn_dropped("thinking", "it was produced by anthropic", "messages[3]")
    call.warn_dropped("thinking", "it was produced by gemini", "messages[5]")
    call.warn_dropped("tool.strict", "no strict tool use")
    assert [r.getMessage() for r in lossy_warnings(caplog)] == [
        f"dropped thinking at messages[1] for {call.provider}: it was produced by anthropic",
        f"dropped thinking at messages[5] for {call.provider}: it was produced by gemini",
        f"dropped tool.strict for {call.provider}: no strict tool use",
    ]
    assert [w.message_id for w in call.warnings] == [
        "messages[1]",
        "messages[3]",
        "messages[5]",
        None,
    ]


def test_a_long_conversation_that_swaps_provider_logs_each_kind_of_drop_once(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Twelve turns with thinking and a tool, the model swapped every turn: each provider
    drops every other provider's thinking on every turn, yet each kind of drop (which
    provider, what, why) is one WARN line for the whole session, however many messages and
    calls it spans (171 lines for 40 turns before, one per message)."""
    import metis

    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", emulator.url)
    monkeypatch.setenv("OPENAI_BASE_URL", emulator.url + "/v1")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key")
    caplog.set_level("WARNING", logger="metis")

    @metis.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"{city}: 21C"

    models = ["anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-flash", "openai_responses:gpt-5"]
    session = metis.Session(models[0], tools=[get_weather], reasoning="low")
    for turn in range(12):
        session.model = models[turn % 3]
        session.run(f"What is the weather in city {turn}?")
    lines = [(r.adapter, r.block_type, r.reason) for r in lossy_warnings(caplog)]  # type: ignore[attr-defined]
    assert len(lines) == len(set(lines)) == 6  # each provider, the two others' thinking
    assert {line[1] for line in lines} == {"thinking"}
