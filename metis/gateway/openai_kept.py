"""An OpenAI client's resent turns read once per content, as a Messages client's are
(:func:`metis.gateway.kept_turns.kept`: keyed by the exact content and the model, bounded,
given only while unchanged).

A run of items is kept when reading it depends on nothing but its content: in Chat
Completions a system, developer or user message of text and image URLs, an assistant message
of text, reasoning and tool calls with the gateway's own ids (``tu_``), or a run of tool
messages answering such ids (one canonical message, as parallel results are); in Responses a
message item of text and image URLs, or a run of function or custom tool calls (or of their
outputs) with the gateway's own call ids, with the message items of the same role around them
(consecutive items of one role are one canonical message). Anything else is read with its
request each time, as before: a provider's tool id (mapped to an id the request's call and
result share), a legacy ``function_call`` or ``function`` result (matched by name within the
request), an audio reply, annotations, a file, an audio input, an opaque part, a reasoning or
compaction item, an item the reader leaves out. A kept run that follows an item of its role
read with the request is joined to that item's message, as the reader joins them. Neither
reader marks anything with the model today; runs are keyed by it all the same, so a reader
that comes to mark one stays exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from metis.gateway.inbound import KeptIds
from metis.gateway.kept_turns import kept, own_id
from metis.histories.openai_chat import from_openai_chat_turn
from metis.histories.reading import Ids, history
from metis.model.content import Message, Role

CHAT_PARTS = frozenset({"text", "image_url"})
RESPONSES_PARTS = frozenset({"input_text", "output_text", "text", "refusal", "input_image"})
RESPONSES_ROLES = {"user": "user", "assistant": "assistant", "system": None, "developer": None}
CALLS = frozenset({"function_call", "custom_tool_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def read_chat_turns(raw: Any, model: str | None, ids: Ids) -> list[Message]:
    """``from_openai_chat(raw, ids=ids)``, each plain run of turns read once per content."""
    turns = history(raw)
    plain = [_chat_plain(turn) for turn in turns]
    out: list[Message] = []
    called: dict[str, str] = {}
    start = 0
    while start < len(turns):
        stop = _chat_run(turns, plain, start)
        if stop == start:
            from_openai_chat_turn(out, turns[start], f"messages[{start}]", ids, called)
            start += 1
            continue
        run = turns[start:stop]
        for message in kept("chat", model, run, partial(_chat_read, run, start)):
            join(out, message, Role.TOOL)
        start = stop
    return out


def _chat_read(run: list[Any], start: int) -> list[Message]:
    out: list[Message] = []
    for i, turn in enumerate(run, start):
        from_openai_chat_turn(out, turn, f"messages[{i}]", KeptIds(), {})
    return out


def join(out: list[Message], message: Message, *joined: Role) -> None:
    """``message`` onto ``out``, joined to the one before it when both have a role of
    ``joined`` and the same role."""
    last = out[-1] if out else None
    if last is not None and last.role is message.role and message.role in joined:
        out[-1] = Message(role=message.role, content=[*last.content, *message.content])
    else:
        out.append(message)


def _chat_run(turns: list[Any], plain: list[bool], start: int) -> int:
    """Where the plain run of turns at ``start`` ends (``start``: none)."""
    if not plain[start]:
        return start
    stop = start + 1
    if turns[start]["role"] == "tool":
        while stop < len(turns) and plain[stop] and turns[stop]["role"] == "tool":
            stop += 1
    return stop


def _chat_plain(turn: Any) -> bool:
    if not isinstance(turn, dict):
        return False
    role = turn.get("role")
    if role in ("system", "developer", "user"):
        return _chat_content(turn.get("content"))
    if role == "tool":
        return own_id(turn.get("tool_call_id")) and _chat_content(turn.get("content"))
    if role != "assistant" or not _chat_content(turn.get("content")):
        return False
    if any(turn.get(key) is not None for key in ("function_call", "audio")):
        return False
    calls = turn.get("tool_calls")
    return not turn.get("annotations") and (
        calls is None
        or (
            isinstance(calls, list)
            and all(isinstance(call, dict) and own_id(call.get("id")) for call in calls)
        )
    )


def _chat_content(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(_part(part, CHAT_PARTS) for part in content)


def _part(part: Any, kinds: frozenset[str]) -> bool:
    kind = part.get("type") if isinstance(part, dict) else None
    return isinstance(kind, str) and kind in kinds


def responses_run(items: list[Any], start: int) -> int:
    """Where the plain run of Responses ``items`` at ``start`` ends (``start``: none): items
    of one role, a system or developer message alone."""
    role = _responses_role(items[start])
    if role is None:
        return start
    stop = start + 1
    if role != "system":
        while stop < len(items) and _responses_role(items[stop]) == role:
            stop += 1
    return stop


def _responses_role(item: Any) -> str | None:
    """The role of the message a plain item is read into (None: not plain)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        return None
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str) or role not in RESPONSES_ROLES:
            return None
        content = item.get("content")
        if not (isinstance(content, str) or _responses_parts(content)):
            return None
        return RESPONSES_ROLES[role] or "system"
    if kind in CALLS and own_id(item.get("call_id")):
        return "assistant"
    if kind in OUTPUTS and own_id(item.get("call_id")):
        output = item.get("output")
        plain = isinstance(output, str) or (
            isinstance(output, list) and all(isinstance(p, Mapping) for p in output)
        )
        return "tool" if plain else None
    return None


def _responses_parts(content: Any) -> bool:
    return isinstance(content, list) and all(
        _part(part, RESPONSES_PARTS)
        and (part["type"] != "input_image" or isinstance(part.get("image_url"), str))
        for part in content
    )
