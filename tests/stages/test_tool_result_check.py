"""tool_result_check: every tool call answered, every answer called for (docs/contract.md §6)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.errors import ErrorClass, InvalidRequestError, StackError
from metis.model import (
    CanonicalRequest,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.call import Call
from metis.stages.policy.tool_result_check import PLACEHOLDER, ToolResultCheck

from ..helpers import lossy_warnings, make_call, warn_fields

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)


def _use(tid: str) -> ToolUseBlock:
    return ToolUseBlock(id=tid, name="lookup", input={"q": tid})


def _result(tid: str, text: str = "ok") -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=tid, content=text)


def _request(*messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-x", messages=list(messages), max_output_tokens=100
    )


def _check(request: CanonicalRequest, **options: Any) -> CanonicalRequest:
    return ToolResultCheck(**options).rewrite(request, make_call())


async def _run(request: CanonicalRequest, **options: Any) -> list[Any]:
    """The requests inner was called with; raises what the stage raises."""
    calls: list[Any] = []

    async def inner(req: CanonicalRequest, call: Call) -> Any:
        calls.append(req)
        yield "event"

    try:
        out = [e async for e in ToolResultCheck(**options)(request, make_call(), inner)]
    except InvalidRequestError:
        assert calls == [], "inner ran before the check refused"
        raise
    assert out == ["event"]
    return calls


COMPLETE = _request(
    Message.user("go"),
    Message.assistant("calling", _use("a")),
    Message.tool(_result("a")),
    Message.assistant(_use("b"), _use("c")),
    Message.tool(_result("c"), _result("b")),
    Message.assistant("done"),
    Message.user("thanks"),
)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["error", "placeholder"])
async def test_a_complete_history_passes_unchanged(mode: str) -> None:
    calls = await _run(COMPLETE, on_missing=mode)
    assert calls[0] is COMPLETE


def test_a_history_without_tools_is_the_same_object() -> None:
    request = _request(Message.user("hi"), Message.assistant("hello"), Message.user("bye"))
    assert _check(request) is request
    assert _check(request, on_missing="placeholder") is request


@pytest.mark.anyio
async def test_a_missing_result_is_refused_naming_the_call() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("tu_lost"), _use("tu_found")),
        Message.tool(_result("tu_found")),
        Message.assistant("carrying on"),
    )
    with pytest.raises(InvalidRequestError) as info:
        await _run(request)
    error = info.value
    assert error.error_class is ErrorClass.INVALID_REQUEST
    assert error.retryable is False
    assert "tu_lost" in error.message
    assert "tu_found" not in error.message
    assert error.provider == "anthropic"
    assert error.request_id == request.request_id


def test_a_trailing_unanswered_call_is_missing_too() -> None:
    request = _request(Message.user("go"), Message.assistant(_use("tu_last")))
    with pytest.raises(InvalidRequestError, match="tu_last"):
        _check(request)


def test_a_result_after_the_next_assistant_turn_is_too_late() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("tu_1")),
        Message.assistant("I will wait"),
        Message.tool(_result("tu_1")),
    )
    with pytest.raises(InvalidRequestError) as info:
        _check(request)
    assert "have no result (answer them before the next message: metis.run_tools(" in (
        info.value.message
    )  # the call went unanswered ...
    assert "did not make" in info.value.message  # ... and the late answer is an orphan


@pytest.mark.anyio
async def test_an_orphan_result_is_refused_naming_it() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("tu_1")),
        Message.tool(_result("tu_1"), _result("tu_ghost")),
    )
    with pytest.raises(InvalidRequestError) as info:
        await _run(request)
    assert "tu_ghost" in info.value.message
    assert "messages[2]" in info.value.message


def test_a_result_before_any_call_is_an_orphan() -> None:
    with pytest.raises(InvalidRequestError, match="tu_x"):
        _check(_request(Message.tool(_result("tu_x")), Message.user("hi")))


def test_a_second_answer_to_one_call_is_refused() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("tu_1")),
        Message.tool(_result("tu_1")),
        Message.tool(_result("tu_1", "again")),
    )
    with pytest.raises(InvalidRequestError, match="answered already"):
        _check(request)


def test_every_problem_is_listed_in_one_error() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("tu_1"), _use("tu_2")),
        Message.tool(_result("tu_9")),
        Message.assistant(_use("tu_3")),
    )
    with pytest.raises(InvalidRequestError) as info:
        _check(request)
    for tid in ("tu_1", "tu_2", "tu_3", "tu_9"):
        assert tid in info.value.message


def test_parallel_calls_answered_in_one_tool_message_in_any_order() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("a"), _use("b"), _use("c")),
        Message.tool(_result("c"), _result("a"), _result("b")),
    )
    assert _check(request) is request


def test_parallel_calls_answered_across_several_messages() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("a"), _use("b")),
        Message.tool(_result("b")),
        Message.tool(_result("a")),
    )
    assert _check(request) is request


def test_results_in_a_user_message_count() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("a"), _use("b")),
        Message.user(_result("a"), _result("b"), "and here is more context"),
        Message.assistant("ok"),
    )
    assert _check(request) is request


def test_the_same_id_may_be_reused_by_a_later_turn() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("x")),
        Message.tool(_result("x")),
        Message.assistant(_use("x")),
        Message.tool(_result("x")),
    )
    assert _check(request) is request


# on_missing: placeholder -----------------------------------------------------------------------


def _placeholder(tid: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=tid, content=PLACEHOLDER, is_error=True)


def test_placeholder_answers_a_missing_call_right_after_its_turn() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("a"), _use("b")),
        Message.tool(_result("a")),
        Message.assistant("next"),
        Message.user("more"),
    )
    before = request.model_dump()
    out = _check(request, on_missing="placeholder")
    assert [m.role for m in out.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
        Role.USER,
    ]
    assert out.messages[2].content == [_placeholder("b")]
    assert out.messages[3] is request.messages[2]
    assert request.model_dump() == before  # the caller's request is untouched


def test_placeholder_answers_a_trailing_call() -> None:
    request = _request(Message.user("go"), Message.assistant("calling", _use("a"), _use("b")))
    out = _check(request, on_missing="placeholder")
    assert len(out.messages) == 3
    assert out.messages[2].role is Role.TOOL
    assert out.messages[2].content == [_placeholder("a"), _placeholder("b")]
    assert all(isinstance(b, ToolResultBlock) and b.is_error for b in out.messages[2].content)


def test_placeholder_history_then_passes_the_strict_check() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(_use("a")),
        Message.assistant(_use("b")),
        Message.tool(_result("b")),
        Message.tool(_result("zzz")),
    )
    fixed = _check(request, on_missing="placeholder")
    assert _check(fixed) is fixed


def test_placeholder_drops_orphans_with_a_warn(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    orphan_only = Message(role=Role.TOOL, content=[_result("ghost1")], id="m_orphan")
    mixed = Message.user(_result("a"), _result("ghost2"), "context")
    request = _request(Message.user("go"), Message.assistant(_use("a")), mixed, orphan_only)
    out = _check(request, on_missing="placeholder")
    assert len(out.messages) == 3  # the orphan-only message is gone whole
    assert out.messages[2].content == [_result("a"), TextBlock(text="context")]
    records = lossy_warnings(caplog)  # one line for the kind, naming where it was first
    assert [warn_fields(r)["message_id"] for r in records] == ["messages[2]"]
    for record in records:
        fields = warn_fields(record)
        assert fields["block_type"] == "tool_result"
        assert fields["adapter"] == "anthropic"
        assert fields["session_id"] == "s1"
        assert "no tool call" in fields["reason"]


def test_error_mode_warns_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    with pytest.raises(InvalidRequestError):
        _check(_request(Message.user("go"), Message.tool(_result("ghost"))))
    assert lossy_warnings(caplog) == []


def test_unknown_mode_is_refused_at_assembly() -> None:
    with pytest.raises(StackError):
        ToolResultCheck(on_missing="ignore")
