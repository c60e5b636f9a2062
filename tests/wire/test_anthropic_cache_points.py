"""The caller's cache breakpoints in an Anthropic body: found once with the encoded history
(``WireMessages``), and looked for anew in messages an edit replaced."""

from __future__ import annotations

from typing import Any

from metis.model.cache import CacheHint
from metis.model.content import Message, TextBlock
from metis.model.request import CanonicalRequest
from metis.wire.anthropic import codec
from metis.wire.anthropic.cache import WireMessages, present
from metis.wire.cache_points import replaced

from ..helpers import make_call


def _history(hinted: int | None) -> list[Message]:
    messages = []
    for i in range(6):
        text = TextBlock(text=f"turn {i}", cache=CacheHint() if i == hinted else None)
        messages.append(Message.user(text) if i % 2 == 0 else Message.assistant(text))
    return messages


def _encode(messages: list[Message]) -> dict[str, Any]:
    request = CanonicalRequest(model="anthropic:claude-x", messages=messages, max_output_tokens=64)
    return codec.encode(request, make_call())


def _scanned(body: dict[str, Any]) -> list[Any]:
    """What a search of every block finds (a plain list has no breakpoints with it)."""
    return present({**body, "messages": list(body["messages"])})


def test_hints_found_with_the_encoding_match_a_search_of_every_block() -> None:
    body = _encode(_history(hinted=2))
    assert type(body["messages"]) is WireMessages
    assert [p.path for p in present(body)] == [("messages", 2, "content", 0)]
    assert present(body) == _scanned(body)


def test_each_body_gets_its_own_list_with_the_kept_breakpoints() -> None:
    messages = _history(hinted=4)
    first, second = _encode(messages), _encode(list(messages))
    assert second["messages"] is not first["messages"]
    assert second["messages"] == first["messages"]
    assert present(second) == _scanned(second) != []


def test_an_edited_history_is_searched_anew() -> None:
    messages = _history(hinted=None)
    assert present(_encode(messages)) == []
    messages[3] = Message.assistant(TextBlock(text="turn 3", cache=CacheHint(ttl="1h")))
    points = present(_encode(messages))
    assert [(p.path, p.ttl) for p in points] == [(("messages", 3, "content", 0), "1h")]


def test_messages_an_edit_replaced_are_searched_not_taken_from_the_encoding() -> None:
    body = _encode(_history(hinted=None))
    assert present(body) == []
    path = ("messages", 1, "content", 0)
    block = {**body["messages"][1]["content"][0], "cache_control": {"type": "ephemeral"}}
    edited = replaced(body, path, block)
    assert type(edited["messages"]) is list
    assert [p.path for p in present(edited)] == [path]
