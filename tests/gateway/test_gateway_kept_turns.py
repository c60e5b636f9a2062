"""A Messages client's turns as the gateway reads them: the same content gives the very
messages read before (metis/gateway/kept_turns.py), never another content's, never a message
changed since, and a turn whose reading depends on its request is read with it."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from metis.gateway import kept_turns
from metis.gateway.anthropic_api import read_messages
from metis.gateway.inbound import KeptIds
from metis.histories.anthropic import from_anthropic
from metis.model import Message, Role, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

pytestmark = [pytest.mark.backend_independent, pytest.mark.usefixtures("kept_from_first_read")]

CALL = {"type": "tool_use", "id": "tu_01JAAAAAAAAAAAAAAAAAAAAAAA", "name": "get", "input": {"a": 1}}
RESULT = {"type": "tool_result", "tool_use_id": "tu_01JAAAAAAAAAAAAAAAAAAAAAAA", "content": "ok"}
TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather?"},
    {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, CALL],
    },
    {"role": "user", "content": [RESULT, {"type": "text", "text": "and tomorrow?"}]},
]


def _read(
    turns: list[dict[str, Any]], system: Any = "Be brief.", model: str = "m"
) -> list[Message]:
    body = {"model": model, "max_tokens": 16, "system": system, "messages": copy.deepcopy(turns)}
    return read_messages(body).messages


def test_the_same_turns_sent_again_are_the_same_messages_as_read_alone() -> None:
    first = _read(TURNS)
    again = _read(TURNS)
    assert len(again) == 5  # system, user, assistant, the tool results' turn, user
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert again == from_anthropic(
        copy.deepcopy(TURNS), system="Be brief.", model="m", ids=KeptIds()
    )
    assert again[0].role is Role.SYSTEM and again[3].role is Role.TOOL


def test_a_turn_changed_or_another_model_is_read_anew() -> None:
    first = _read(TURNS)
    edited = [*TURNS[:2], {"role": "user", "content": [RESULT, {"type": "text", "text": "no"}]}]
    changed = _read(edited, system="Be very brief.")
    assert changed[1] is first[1] and changed[2] is first[2]  # the turns not changed
    assert changed[0] is not first[0] and changed[0].content == [TextBlock(text="Be very brief.")]
    assert changed[4] is not first[4] and changed[4].content == [TextBlock(text="no")]
    as_int = _read([{"role": "user", "content": [{**CALL, "input": {"a": True}}]}])
    assert as_int[1].content[0].input == {"a": True}  # never a 1 for a True (marshal tells them)
    other_model = _read(TURNS, model="n")
    thinking = other_model[2].content[0]
    assert other_model[2] is not first[2]
    assert isinstance(thinking, ThinkingBlock) and thinking.provider_raw is not None
    assert thinking.provider_raw.model == "n"


def test_a_message_changed_in_place_is_not_given_again() -> None:
    first = _read(TURNS)
    first[1].content.append(TextBlock(text="added"))
    call = first[2].content[1]
    assert isinstance(call, ToolUseBlock)
    call.input["a"] = 2
    again = _read(TURNS)
    assert again[1] is not first[1] and again[1].content == [TextBlock(text="What is the weather?")]
    fresh_call = again[2].content[1]
    assert again[2] is not first[2] and isinstance(fresh_call, ToolUseBlock)
    assert fresh_call.input == {"a": 1}


def test_a_turn_whose_ids_the_request_maps_is_read_with_its_request() -> None:
    """A provider's tool id gets a canonical id per request, shared by its call and result."""
    call = {**CALL, "id": "toolu_1"}
    result = {**RESULT, "tool_use_id": "toolu_1"}
    turns = [
        TURNS[0],
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    first, again = _read(turns), _read(turns)
    assert first[2] is not again[2] and first[3] is not again[3]
    for messages in (first, again):
        used, answered = messages[2].content[0], messages[3].content[0]
        assert isinstance(used, ToolUseBlock) and isinstance(answered, ToolResultBlock)
        assert used.id == answered.tool_use_id and used.id.startswith("tu_")
    assert first[1] is again[1]  # the plain turn before them is kept


def test_a_turn_with_a_block_the_reader_reports_is_read_and_reported_each_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    turns = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": 7}]}]
    with caplog.at_level(logging.WARNING, logger="metis"):
        first, again = _read(turns), _read(turns)
    assert first[1] is not again[1]
    said = [r for r in caplog.records if "dropped int at messages[0]" in r.getMessage()]
    assert len(said) == 2


def test_the_turns_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept_turns, "KEPT_AT_MOST", 2)
    one = [{"role": "user", "content": "one"}]
    first = _read(one, system=None)
    _read([{"role": "user", "content": "two"}], system=None)
    _read([{"role": "user", "content": "three"}], system=None)  # the oldest goes
    assert _read(one, system=None)[0] is not first[0]
    large = [{"role": "user", "content": "x" * (kept_turns.KEPT_SIZE + 1)}]
    assert _read(large, system=None)[0] is not _read(large, system=None)[0]


def test_a_turn_is_kept_at_its_second_read_and_the_least_recently_found_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """By default a turn read once is only noted (one never resent costs no keeping and
    pushes out nothing); the store forgets the turn found least recently."""
    monkeypatch.setattr(kept_turns, "KEPT_ON_READ", 2)
    monkeypatch.setattr(kept_turns, "KEPT_AT_MOST", 2)
    one, two, three = ([{"role": "user", "content": text}] for text in ("one", "two", "three"))
    first = _read(one, system=None)
    second = _read(one, system=None)
    assert second[0] is not first[0]  # read once before: kept now
    assert _read(one, system=None)[0] is second[0]
    _read(two, system=None)
    kept_two = _read(two, system=None)
    assert _read(one, system=None)[0] is second[0]  # found again: now the most recent
    _read(three, system=None)
    _read(three, system=None)  # kept: the least recently found (two) goes
    assert _read(one, system=None)[0] is second[0]
    assert _read(two, system=None)[0] is not kept_two[0]
