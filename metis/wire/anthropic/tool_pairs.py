"""What the Anthropic Messages API accepts of tool calls and their results across the
messages: every ``tool_use`` answered in the very next message by ``tool_result`` blocks
that come first in it, a server tool's result after its ``server_tool_use`` in the same
assistant message, no ``tool_use`` id twice (its 400s, in its words). The library's pre-send
check and the emulator refuse by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from metis.wire.refusal import Refusal


def tool_pairs(messages: list[Any]) -> Iterator[Refusal]:
    """Every tool_use is answered in the very next message, by tool_result blocks that come
    first in it, and only those are answered there; a server tool's result (``SERVER_RESULTS``)
    follows its ``server_tool_use`` in the same assistant message; no two tool_use blocks of
    the request share an id."""
    pending: list[Any] = []
    seen: set[Any] = set()
    for i, message in _turns(messages):
        content = message.get("content")
        answered: list[Any] = []
        uses: list[Any] = []
        stray: tuple[int, Any] | None = None
        orphan: tuple[int, Any] | None = None
        repeated: int | None = None
        servers: list[str] = []
        others = misplaced = False
        for j, block in enumerate(content if isinstance(content, list) else ()):  # one pass
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                answered.append(block.get("tool_use_id"))
                misplaced = misplaced or others
                if stray is None and answered[-1] not in pending:
                    stray = j, answered[-1]
            else:
                others = True
                if kind == "tool_use":
                    if block.get("id") in seen and repeated is None:
                        repeated = j
                    uses.append(block.get("id"))
                    seen.add(block.get("id"))
                elif kind in _SERVER_BLOCKS:  # one look-up for the text blocks
                    if kind == "server_tool_use":
                        servers.append(str(block.get("id")))
                    elif orphan is None and (
                        message.get("role") != "assistant"
                        or block.get("tool_use_id") not in servers
                    ):
                        orphan = j, block
        if pending:
            missing = [p for p in pending if p not in answered]
            if missing or message.get("role") != "user":
                yield _unanswered(i - 1, missing or pending)
        if stray is not None:
            yield Refusal(
                f"messages.{i}.content.{stray[0]}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {stray[1]}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        if misplaced:
            yield Refusal(f"messages.{i}: `tool_result` blocks must come first in the content")
        if repeated is not None:
            yield Refusal(f"messages.{i}.content.{repeated}: `tool_use` ids must be unique")
        if orphan is not None:
            yield _orphan(i, *orphan)
        pending = uses
    if pending:  # a trailing assistant message with open tool calls: a prefill it refuses
        yield _unanswered(len(messages) - 1, pending)


def _turns(messages: list[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each turn with the index of its first message: Anthropic reads consecutive messages of
    one role as one turn (their blocks in order), as it reads them for tool pairs."""
    i = 0
    while i < len(messages):
        first = messages[i] if isinstance(messages[i], dict) else {}
        end = i + 1
        while end < len(messages) and _same_role(first, messages[end]):
            end += 1
        if end == i + 1:
            yield i, first
        else:
            blocks = [b for m in messages[i:end] for b in _as_blocks(m.get("content"))]
            yield i, {"role": first["role"], "content": blocks}
        i = end


def _same_role(first: dict[str, Any], message: Any) -> bool:
    return (
        isinstance(message, dict)
        and first.get("role") in ("user", "assistant")
        and (message.get("role") == first.get("role"))
    )


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


SERVER_RESULTS = frozenset(
    [
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "advisor_tool_result",
    ]
)
"""The blocks a server tool's result comes back in."""
_SERVER_BLOCKS = SERVER_RESULTS | {"server_tool_use"}


def _orphan(i: int, j: int, block: dict[str, Any]) -> Refusal:
    return Refusal(
        f"messages.{i}.content.{j}: `{block.get('type')}` block(s) provided when the message does "
        "not have a corresponding `server_tool_use` block with id "
        f"{block.get('tool_use_id')!r} before it"
    )


def _unanswered(at: int, ids: list[Any]) -> Refusal:
    return Refusal(
        f"messages.{at}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(map(str, ids))}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )
