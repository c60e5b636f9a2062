"""system_hoist: every system instruction gathered into request.system_prompt."""

from __future__ import annotations

import logging

import pytest

from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    TextDelta,
    ToolDefinition,
    ToolUseBlock,
)
from metis.stages.policy.system_hoist import SystemHoist

from ..helpers import drive, lossy_warnings, make_call, warn_fields

IMAGE = ImageBlock(source=Base64ImageSource(media_type="image/png", data="aGk="))


def _request(*messages: Message, system_prompt: str | None = None) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-x",
        messages=list(messages),
        max_output_tokens=100,
        system_prompt=system_prompt,
        tools=[ToolDefinition(name="lookup")],
        temperature=0.5,
    )


def _hoist(request: CanonicalRequest) -> CanonicalRequest:
    return SystemHoist().rewrite(request, make_call())


def test_no_system_at_all_returns_the_same_object() -> None:
    request = _request(Message.user("hi"), Message.assistant("hello"))
    assert _hoist(request) is request


def test_system_prompt_alone_returns_the_same_object() -> None:
    request = _request(Message.user("hi"), system_prompt="Be brief.")
    assert _hoist(request) is request


def test_single_system_message_becomes_the_system_prompt() -> None:
    request = _request(Message.system("You are terse."), Message.user("hi"))
    out = _hoist(request)
    assert out.system_prompt == "You are terse."
    assert out.messages == [Message.user("hi")]


def test_several_systems_join_in_order_with_system_prompt_first() -> None:
    request = _request(
        Message.system("A"),
        Message.user("u1"),
        Message.system("B"),
        Message.assistant("a1"),
        Message.system("C"),
        Message.user("u2"),
        system_prompt="P",
    )
    out = _hoist(request)
    assert out.system_prompt == "P\n\nA\n\nB\n\nC"
    assert [m.role for m in out.messages] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert [m.text for m in out.messages] == ["u1", "a1", "u2"]


def test_text_blocks_of_one_system_message_are_kept_in_order() -> None:
    system = Message(role=Role.SYSTEM, content=[TextBlock(text="one"), TextBlock(text="two")])
    out = _hoist(_request(system, Message.user("hi")))
    assert out.system_prompt == "one\n\ntwo"


@pytest.mark.parametrize("text", ["", "   ", "\n\t \n"])
def test_empty_or_whitespace_system_message_is_omitted(text: str) -> None:
    out = _hoist(_request(Message.system(text), Message.user("hi")))
    assert out.system_prompt is None
    assert out.messages == [Message.user("hi")]


def test_empty_systems_add_no_stray_separators() -> None:
    out = _hoist(
        _request(
            Message.system(""),
            Message.system("A"),
            Message.system("  "),
            Message.user("hi"),
            Message.system("B"),
            system_prompt="",
        )
    )
    assert out.system_prompt == "A\n\nB"


@pytest.mark.parametrize("prompt", ["", "  \n "])
def test_blank_system_prompt_becomes_none(prompt: str) -> None:
    out = _hoist(_request(Message.user("hi"), system_prompt=prompt))
    assert out.system_prompt is None
    assert out.messages == [Message.user("hi")]


def test_no_system_messages_are_left() -> None:
    out = _hoist(
        _request(Message.system("A"), Message.user("hi"), Message.system("B"), system_prompt="P")
    )
    assert all(m.role is not Role.SYSTEM for m in out.messages)


def test_everything_else_in_the_request_is_kept() -> None:
    request = _request(Message.system("A"), Message.user("hi"))
    out = _hoist(request)
    assert out.model_dump(exclude={"system_prompt", "messages"}) == request.model_dump(
        exclude={"system_prompt", "messages"}
    )


def test_the_input_request_is_not_changed() -> None:
    request = _request(Message.system("A"), Message.user("hi"), system_prompt="P")
    before = request.model_dump()
    _hoist(request)
    assert request.model_dump() == before


def test_non_system_messages_are_the_same_objects() -> None:
    user, assistant = Message.user("hi"), Message.assistant("yo")
    out = _hoist(_request(Message.system("A"), user, assistant))
    assert out.messages[0] is user
    assert out.messages[1] is assistant


def test_non_text_block_in_system_is_dropped_with_one_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    system = Message(role=Role.SYSTEM, content=[TextBlock(text="A"), IMAGE], id="sys_1")
    out = SystemHoist().rewrite(_request(system, Message.user("hi")), make_call(session_id="s9"))
    assert out.system_prompt == "A"
    records = lossy_warnings(caplog)
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    fields = warn_fields(records[0])
    assert fields == {
        "session_id": "s9",
        "request_id": "req_1",
        "message_id": "sys_1",
        "block_type": "image",
        "adapter": "anthropic",
        "reason": fields["reason"],
    }
    assert "text" in fields["reason"]


def test_warn_names_the_message_by_position_when_it_has_no_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    tool_use = ToolUseBlock(id="tu_1", name="lookup")
    system = Message(role=Role.SYSTEM, content=[tool_use])
    out = _hoist(_request(Message.user("hi"), system))
    assert out.system_prompt is None
    [record] = lossy_warnings(caplog)
    assert warn_fields(record)["message_id"] == "messages[1]"
    assert warn_fields(record)["block_type"] == "tool_use"


def test_text_only_systems_warn_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    _hoist(_request(Message.system("A"), Message.user("hi"), Message.system("B")))
    assert lossy_warnings(caplog) == []


@pytest.mark.anyio
async def test_as_a_stage_inner_gets_the_hoisted_request_and_items_pass_through() -> None:
    request = _request(Message.system("A"), Message.user("hi"))
    event = TextDelta(0, "x")
    seen, out = await drive(SystemHoist(), request, make_call(), [event])
    assert len(seen) == 1
    assert seen[0].system_prompt == "A"
    assert seen[0].messages == [Message.user("hi")]
    assert out == [event]
    assert out[0] is event
