"""What OpenAI Chat Completions refuses of a conversation's tool messages and of a chosen
function, in its words: run by the client's ``pre_send_check`` (metis/wire/rules.py) and the
emulator's table (``tables/chat.yaml``, the "tool messages" and "chosen function" checks)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from metis.wire.refusal import Refusal


def tool_messages(messages: list[Any]) -> Iterator[Refusal]:
    """Tool messages answer the calls of the assistant message right before them, all of
    them."""
    open_calls: list[Any] = []
    answering: set[Any] | None = None
    open_at = -1
    for i, message in enumerate(messages):
        message = message if isinstance(message, dict) else {}
        role = message.get("role")
        if open_calls and role != "tool":
            yield _open(open_calls, open_at)
            open_calls = []
        if role == "tool":
            yield from _answer(i, message.get("tool_call_id"), answering)
            open_calls = [c for c in open_calls if c != message.get("tool_call_id")]
            continue
        answering = None
        calls = message.get("tool_calls") if role == "assistant" else None
        if not calls:
            continue
        if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
            text = f"Invalid type for 'messages[{i}].tool_calls': expected an array of objects."
            yield Refusal(text, f"messages.[{i}].tool_calls", "invalid_type")
            continue
        open_calls, open_at = [c.get("id") for c in calls], i
        answering = set(open_calls)
    if open_calls:
        yield _open(open_calls, open_at)


def _answer(i: int, call_id: Any, answering: set[Any] | None) -> Iterator[Refusal]:
    if answering is None:
        yield Refusal(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
            f"messages.[{i}].role",
        )
    elif call_id not in answering:
        yield Refusal(
            f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of "
            "previous message.",
            f"messages.[{i}].tool_call_id",
        )


def _open(ids: list[Any], at: int) -> Refusal:
    return Refusal(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(map(str, ids)),
        f"messages.[{at}].role",
    )


def chosen_function(body: dict[str, Any]) -> Iterator[Refusal]:
    """A ``tool_choice`` of a function names one of the request's functions."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return
    name = _obj(choice.get("function")).get("name")
    tools = body.get("tools")
    names = {
        _obj(t.get("function")).get("name")
        for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, dict) and t.get("type") == "function"
    }
    if name not in names:
        yield Refusal(
            f"Invalid value for 'tool_choice': function '{name}' is not present in 'tools'.",
            "tool_choice",
        )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
