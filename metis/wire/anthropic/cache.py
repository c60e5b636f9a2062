"""Anthropic prompt caching (``cache_control``, docs/caching.md): the caller's hints placed by
the encoder, and the cache policy's breakpoints placed by the ``cache_control`` stage.

A breakpoint is a ``cache_control: {type: ephemeral, ttl?}`` on a tool, a system text block or
a message content block; Anthropic refuses one on a thinking block, takes at most four a
request and looks back up to 20 blocks from each for an entry written earlier
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching).
"""

from __future__ import annotations

from typing import Any

from metis.model.content import ContentBlock, Message
from metis.wire.cache_points import Breakpoint, at, marker_ttl, replaced
from metis.wire.codec import EncodeContext

UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def marker(ttl: str | None) -> dict[str, Any]:
    return {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}


def hinted_blocks(
    message: Message,
    encoded: list[tuple[ContentBlock, dict[str, Any]]],
    call: EncodeContext,
    message_id: str,
) -> list[dict[str, Any]]:
    """The wire blocks of one message, each block's cache hint (and the message's, on its last
    block that takes one) as ``cache_control``."""
    out: list[dict[str, Any]] = []
    for block, wire in encoded:
        if block.cache is not None:
            if wire.get("type") in UNMARKABLE:
                _no_form(call, message_id)
            else:
                wire = {**wire, "cache_control": marker(block.cache.ttl)}
        out.append(wire)
    if message.cache is not None:
        last = next((i for i in reversed(range(len(out))) if _markable(out[i])), None)
        if last is None:
            _no_form(call, message_id)
        elif "cache_control" not in out[last]:
            out[last] = {**out[last], "cache_control": marker(message.cache.ttl)}
    return out


def _no_form(call: EncodeContext, message_id: str) -> None:
    call.warn_dropped(
        "cache", "Anthropic takes no cache breakpoint on a thinking block", message_id=message_id
    )


def _markable(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") not in UNMARKABLE


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class WireMessages(list[Any]):
    """A body's ``messages`` as the codec made them, with the breakpoints they carry found
    once (``points``): the encoded history is kept for the next call, and its copy in each
    body brings them along. An edit that changes the messages makes a new list (the house
    rule, docs/stages.md), a plain one, whose breakpoints :func:`present` looks for anew."""

    __slots__ = ("points",)

    def __init__(self, messages: list[Any], points: tuple[Breakpoint, ...] | None = None):
        super().__init__(messages)
        self.points = tuple(_message_points(messages)) if points is None else points

    def copy(self) -> WireMessages:
        """A new list of the same messages for one body, with their breakpoints."""
        return WireMessages(self, self.points)


def present(body: dict[str, Any]) -> list[Breakpoint]:
    """The breakpoints a body carries already (the caller's), in prefix order."""
    found: list[Breakpoint] = []
    for i, block in enumerate(_list(body.get("tools"))):
        _add(found, block, ("tools", i), (0, i))
    for i, block in enumerate(_list(body.get("system"))):
        _add(found, block, ("system", i), (1, i))
    messages = body.get("messages")
    if type(messages) is WireMessages:
        found.extend(messages.points)
    else:
        found.extend(_message_points(_list(messages)))
    return found


def _add(
    found: list[Breakpoint], block: Any, path: tuple[Any, ...], order: tuple[int, ...]
) -> None:
    if isinstance(block, dict) and "cache_control" in block:
        ttl = marker_ttl(block["cache_control"])
        where = path[0] + "".join(
            f"[{step}]" if isinstance(step, int) else f".{step}" for step in path[1:]
        )
        found.append(Breakpoint(path, order, ttl, "hint", where))


def _message_points(messages: list[Any]) -> list[Breakpoint]:
    found: list[Breakpoint] = []
    for m, message in enumerate(messages):
        content = _list(message.get("content")) if isinstance(message, dict) else []
        for b, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            if "cache_control" in block:
                _add(found, block, ("messages", m, "content", b), (2, m, b))
            nested = block.get("content")
            if not isinstance(nested, list):
                continue
            for j, inner in enumerate(nested):
                path = ("messages", m, "content", b, "content", j)
                _add(found, inner, path, (2, m, b, j))
    return found


def policy_points(
    body: dict[str, Any], ttl: str | None, *, system: bool, tools: bool, conversation: bool
) -> list[Breakpoint]:
    """The breakpoints the policy asks for that the body does not carry yet (a system prompt
    given as a string counts as one text block)."""
    points: list[Breakpoint] = []
    ttl = ttl or "5m"
    tool_list = _list(body.get("tools"))
    if tools and tool_list and _unmarked(tool_list[-1]):
        i = len(tool_list) - 1
        points.append(Breakpoint(("tools", i), (0, i), ttl, "tools", "tool definitions"))
    system_value = body.get("system")
    system_list = [{"type": "text"}] if isinstance(system_value, str) and system_value else []
    system_list = system_list or _list(system_value)
    if system and system_list and _unmarked(system_list[-1]):
        i = len(system_list) - 1
        points.append(Breakpoint(("system", i), (1, i), ttl, "system", "system prompt"))
    messages = _list(body.get("messages"))
    if conversation and messages and isinstance(messages[-1], dict):
        m = len(messages) - 1
        content = _list(messages[-1].get("content"))
        b = next((i for i in reversed(range(len(content))) if _markable(content[i])), None)
        if b is not None and _unmarked(content[b]):
            path = ("messages", m, "content", b)
            where = "the conversation so far"
            points.append(Breakpoint(path, (2, m, b), ttl, "conversation", where))
    return points


def _unmarked(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" not in block


def settled(
    body: dict[str, Any],
    added: list[Breakpoint],
    removed: list[Breakpoint],
    ttl: str | None,
) -> dict[str, Any]:
    """The body with a marker of ``ttl`` on each of ``added`` and none on each of
    ``removed``."""
    if isinstance(body.get("system"), str) and any(p.source == "system" for p in added):
        body = {**body, "system": [{"type": "text", "text": body["system"]}]}
    for point in added:
        block = at(body, point.path)
        body = replaced(body, point.path, {**block, "cache_control": marker(ttl)})
    for point in removed:
        block = dict(at(body, point.path))
        block.pop("cache_control", None)
        body = replaced(body, point.path, block)
    return body
