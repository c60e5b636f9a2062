"""An OpenAI client's turns as the gateway reads them (metis/gateway/openai_kept.py): the same
content and model give the very messages read before, never another content's, never a
message changed since; a turn whose reading depends on its request is read with it; the
gateway's replies are those it gave before."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from metis.gateway import kept_turns
from metis.gateway.app import create_app
from metis.gateway.chat_api import read_chat
from metis.gateway.inbound import KeptIds
from metis.gateway.responses_read import read_responses
from metis.histories.openai_chat import from_openai_chat
from metis.model import Message, Role, TextBlock, ToolResultBlock, ToolUseBlock
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = [pytest.mark.backend_independent, pytest.mark.usefixtures("kept_from_first_read")]

ONE, TWO = "tu_01JAAAAAAAAAAAAAAAAAAAAAAA", "tu_01JBBBBBBBBBBBBBBBBBBBBBBB"


def _call(tool_id: str, arguments: Any = '{"city": "Paris"}') -> dict[str, Any]:
    function = {"name": "weather", "arguments": arguments}
    return {"id": tool_id, "type": "function", "function": function}


CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "two calls",
        "tool_calls": [_call(ONE), _call(TWO, '{"city": "Rome"}')],
    },
    {"role": "tool", "tool_call_id": ONE, "content": "sunny"},
    {"role": "tool", "tool_call_id": TWO, "content": [{"type": "text", "text": "rain"}]},
    {"role": "assistant", "content": "Sunny in Paris, rain in Rome."},
    {"role": "user", "content": "And tomorrow?"},
]


def _chat(turns: list[dict[str, Any]], model: str = "m") -> list[Message]:
    return read_chat({"model": model, "messages": copy.deepcopy(turns)}).messages


def test_a_chat_conversation_sent_again_is_the_same_messages_as_read_alone() -> None:
    first, again = _chat(CHAT), _chat(CHAT)
    assert len(again) == 6  # the two tool messages are one canonical message
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert again == from_openai_chat(copy.deepcopy(CHAT), ids=KeptIds())
    results = again[3].content
    assert again[3].role is Role.TOOL and [r.tool_use_id for r in results] == [ONE, TWO]  # type: ignore[union-attr]


def test_a_chat_turn_changed_or_another_model_is_read_anew() -> None:
    first = _chat(CHAT)
    edited = [*CHAT[:-1], {"role": "user", "content": "And the day after?"}]
    changed = _chat(edited)
    assert all(changed[i] is first[i] for i in range(5))
    assert changed[5] is not first[5] and changed[5].content == [
        TextBlock(text="And the day after?")
    ]
    other = _chat(CHAT, model="n")
    assert other == first and all(a is not b for a, b in zip(other, first, strict=True))


@pytest.mark.parametrize("value", [1, True, 1.0])
def test_a_chat_turn_is_found_by_its_exact_types(value: Any) -> None:
    for seen in (1, True, 1.0):  # each read once, in the same cache
        _chat([{"role": "assistant", "tool_calls": [_call(ONE, {"a": seen})]}])
    read = _chat([{"role": "assistant", "tool_calls": [_call(ONE, {"a": value})]}])
    given = read[0].content[0]
    assert isinstance(given, ToolUseBlock) and type(given.input["a"]) is type(value)


def test_a_chat_message_changed_in_place_is_not_given_again() -> None:
    first = _chat(CHAT)
    first[0].content.append(TextBlock(text="added"))
    call = first[2].content[1]
    assert isinstance(call, ToolUseBlock)
    call.input["city"] = "Oslo"
    again = _chat(CHAT)
    assert again[0] is not first[0] and again[0].content == [TextBlock(text="Be brief.")]
    fresh = again[2].content[1]
    assert again[2] is not first[2] and isinstance(fresh, ToolUseBlock)
    assert fresh.input == {"city": "Paris"}
    assert again[1] is first[1]


def test_chat_turns_whose_ids_the_request_maps_are_read_with_their_request() -> None:
    """A client's own tool id (and a legacy function call, matched by name) gets a canonical
    id per request, shared by its call and result; a tool message of the gateway's id after
    one of them joins its canonical message."""
    turns = [
        CHAT[1],
        {"role": "assistant", "tool_calls": [_call("call_1"), _call(ONE)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": ONE, "content": "rain"},
        {"role": "assistant", "function_call": {"name": "weather", "arguments": "{}"}},
        {"role": "function", "name": "weather", "content": "dry"},
    ]
    first, again = _chat(turns), _chat(turns)
    assert first[0] is again[0]  # the plain turn before them is kept
    assert all(first[i] is not again[i] for i in (1, 2, 3, 4))
    for messages in (first, again):
        calls, results = messages[1].content, messages[2].content
        assert [type(b) for b in results] == [ToolResultBlock, ToolResultBlock]
        assert [c.id for c in calls] == [r.tool_use_id for r in results]  # type: ignore[union-attr]
        legacy, answer = messages[3].content[0], messages[4].content[0]
        assert legacy.id == answer.tool_use_id  # type: ignore[union-attr]
    assert first[1].content[0].id != again[1].content[0].id  # type: ignore[union-attr]


def test_the_chat_turns_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept_turns, "KEPT_AT_MOST", 2)
    first = _chat([{"role": "user", "content": "one"}])
    _chat([{"role": "user", "content": "two"}])
    _chat([{"role": "user", "content": "three"}])  # the oldest goes
    assert _chat([{"role": "user", "content": "one"}])[0] is not first[0]
    large = [{"role": "user", "content": "x" * (kept_turns.KEPT_SIZE + 1)}]
    assert _chat(large)[0] is not _chat(large)[0]


ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Let me"}],
    },
    {"type": "function_call", "call_id": ONE, "name": "weather", "arguments": '{"c": "P"}'},
    {"type": "function_call_output", "call_id": ONE, "output": "sunny"},
    {"role": "user", "content": "Thanks"},
]


def _responses(items: list[dict[str, Any]], model: str = "m") -> list[Message]:
    return read_responses({"model": model, "input": copy.deepcopy(items)}).messages


def test_responses_items_sent_again_are_the_same_messages_as_read_alone() -> None:
    first, again = _responses(ITEMS), _responses(ITEMS)
    assert [m.role for m in again] == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER]
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert [type(b) for b in again[2].content] == [TextBlock, ToolUseBlock]
    kept_turns.clear()
    assert _responses(ITEMS) == again
    assert _responses(ITEMS, model="n")[1] is not again[1]


def test_responses_items_of_a_client_s_id_or_left_out_are_read_with_their_request() -> None:
    items = [
        ITEMS[1],
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
        {"type": "function_call", "call_id": ONE, "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "item_reference", "id": "msg_1"},
        {"type": "function_call_output", "call_id": ONE, "output": "rain"},
    ]
    first = read_responses({"model": "m", "input": copy.deepcopy(items)})
    again = read_responses({"model": "m", "input": copy.deepcopy(items)})
    assert again.messages[0] is first.messages[0]
    assert [m.role for m in again.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    for inbound in (first, again):
        calls, results = inbound.messages[1].content, inbound.messages[2].content
        assert [c.id for c in calls] == [r.tool_use_id for r in results]  # type: ignore[union-attr]
        assert calls[1].id == ONE and calls[0].id != ONE  # type: ignore[union-attr]
        assert any("item_reference" in said for said in inbound.ignored)


@pytest.mark.anyio
async def test_the_gateway_s_chat_replies_are_those_it_gave_before() -> None:
    body = {"model": "flash", "max_tokens": 50, "messages": CHAT}
    app = create_app(gateway_config(Emulator()))
    headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
    transport = httpx.ASGITransport(app=app)
    replies = []
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        for clear in (True, False, False, True):
            if clear:
                kept_turns.clear()
            reply = await client.post("/v1/chat/completions", json=body, headers=headers)
            assert reply.status_code == 200, reply.text
            said = reply.json()
            replies.append((said["choices"], said["usage"]))
    assert replies[1:] == replies[:-1]
