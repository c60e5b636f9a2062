"""Bedrock Converse prompt caching (``cachePoint``, docs/caching.md): the caller's hints placed
by the encoder, and the cache policy's checkpoints placed by the ``cache_control`` stage.

A checkpoint is a block of its own, ``{"cachePoint": {"type": "default", "ttl"?}}``, in
``system``, ``messages[].content`` or ``toolConfig.tools``: everything before it is cached
(https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html). Claude models
take at most four a request, as on Anthropic's API.
"""

from __future__ import annotations

from typing import Any

from metis.model.content import ContentBlock, Message
from metis.wire.cache_points import Breakpoint, at, marker_ttl, replaced


def point(ttl: str | None) -> dict[str, Any]:
    return {"cachePoint": {"type": "default", **({"ttl": ttl} if ttl else {})}}


def hinted_blocks(
    message: Message, encoded: list[tuple[ContentBlock | None, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The wire blocks of one message with a checkpoint after each hinted block (and after
    the last, for a hint on the message). A block that became several wire blocks is paired
    with the last of them; the others with None."""
    out: list[dict[str, Any]] = []
    for block, wire in encoded:
        out.append(wire)
        if block is not None and block.cache is not None:
            out.append(point(block.cache.ttl))
    if message.cache is not None and out and not _is_point(out[-1]):
        out.append(point(message.cache.ttl))
    return out


def _is_point(block: Any) -> bool:
    return isinstance(block, dict) and "cachePoint" in block


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _sections(body: dict[str, Any]) -> list[tuple[tuple[Any, ...], tuple[int, ...], str]]:
    """Each list that may hold checkpoints: its path, its place in prefix order, its name."""
    sections: list[tuple[tuple[Any, ...], tuple[int, ...], str]] = []
    if isinstance(body.get("toolConfig"), dict) and "tools" in body["toolConfig"]:
        sections.append((("toolConfig", "tools"), (0,), "toolConfig.tools"))
    if "system" in body:
        sections.append((("system",), (1,), "system"))
    for m, message in enumerate(_list(body.get("messages"))):
        if isinstance(message, dict) and "content" in message:
            sections.append((("messages", m, "content"), (2, m), f"messages[{m}].content"))
    return sections


def present(body: dict[str, Any]) -> list[Breakpoint]:
    """The checkpoints a body carries already (the caller's), in prefix order."""
    found: list[Breakpoint] = []
    for path, order, name in _sections(body):
        for i, block in enumerate(_list(at(body, path))):
            if _is_point(block):
                ttl = marker_ttl(block["cachePoint"])
                found.append(Breakpoint((*path, i), (*order, i), ttl, "hint", f"{name}[{i}]"))
    return found


def policy_points(
    body: dict[str, Any], ttl: str | None, *, system: bool, tools: bool, conversation: bool
) -> list[Breakpoint]:
    """The checkpoints the policy asks for that the body does not end with already: each at
    the end of its list (the path is where it would be inserted)."""
    wanted = {"toolConfig.tools": ("tools", tools), "system": ("system", system)}
    messages = _list(body.get("messages"))
    last_message = f"messages[{len(messages) - 1}].content"
    points: list[Breakpoint] = []
    for path, order, name in _sections(body):
        at_end = conversation and name == last_message
        source, wanted_here = wanted.get(name, ("conversation", at_end))
        items = _list(at(body, path))
        if not wanted_here or not items or _is_point(items[-1]):
            continue
        where = {"tools": "tool definitions", "system": "system prompt"}.get(
            source, "the conversation so far"
        )
        i = len(items)
        points.append(Breakpoint((*path, i), (*order, i), ttl or "5m", source, where))  # type: ignore[arg-type]
    return points


def settled(
    body: dict[str, Any], added: list[Breakpoint], removed: list[Breakpoint], ttl: str | None
) -> dict[str, Any]:
    """The body with a checkpoint of ``ttl`` appended for each of ``added`` and each of
    ``removed`` taken out (from the last, so earlier indexes hold)."""
    for new in added:
        items = at(body, new.path[:-1])
        body = replaced(body, new.path[:-1], [*items, point(ttl)])
    for old in sorted(removed, key=lambda b: b.order, reverse=True):
        items = list(at(body, old.path[:-1]))
        del items[old.path[-1]]
        body = replaced(body, old.path[:-1], items)
    return body
