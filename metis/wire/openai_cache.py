"""OpenAI prompt caching on the wire (docs/caching.md), for Chat Completions and Responses.

Every OpenAI model caches prefixes by itself; a request may add ``prompt_cache_key`` (which
calls share a cache) and, before gpt-5.6, ``prompt_cache_retention`` (``in_memory`` or
``24h``; gpt-5.5 takes ``24h`` only). From gpt-5.6 a cached prefix is matched only where a
breakpoint ends it: OpenAI puts one at the end of the newest message itself (implicit mode),
and a request may mark up to three more on content parts with
``prompt_cache_breakpoint: {mode: explicit}``; retention has no effect there
(``prompt_cache_options.ttl`` replaces it, and OpenAI refuses the two together). Sources: the
prompt-caching guide (developers.openai.com/api/docs/guides/prompt-caching) and the SDK's
``PromptCacheOptions``.
"""

from __future__ import annotations

from typing import Any

from metis.model.content import Message, TextBlock

BREAKPOINT = "prompt_cache_breakpoint"
EXPLICIT = {"mode": "explicit"}
MAX_EXPLICIT = 3
"""Explicit breakpoints a request writes beside the implicit one."""


def hinted(message: Message, block: Any) -> bool:
    """Whether the caller asked for a cache entry to end at ``block`` (its own hint, or the
    message's on its last block)."""
    return getattr(block, "cache", None) is not None or (
        message.cache is not None and block is message.content[-1]
    )


def text_part(kind: str, block: TextBlock, mark: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": kind, "text": block.text}
    return {**part, BREAKPOINT: dict(EXPLICIT)} if mark else part


def marked_paths(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where the body's content parts carry a breakpoint, in order: (list, item, part)."""
    found: list[tuple[str, int, int]] = []
    for key in ("messages", "input"):
        items = body.get(key)
        for i, item in enumerate(items if isinstance(items, list) else []):
            content = item.get("content") if isinstance(item, dict) else None
            for j, part in enumerate(content if isinstance(content, list) else []):
                if isinstance(part, dict) and BREAKPOINT in part:
                    found.append((key, i, j))
    return found


def unmarked(body: dict[str, Any], paths: list[tuple[str, int, int]]) -> dict[str, Any]:
    """The body without the breakpoints at ``paths`` (the rest shared with ``body``)."""
    out = dict(body)
    for key, i, j in paths:
        items = out[key] = list(out[key])
        item = items[i] = dict(items[i])
        content = item["content"] = list(item["content"])
        content[j] = {k: v for k, v in content[j].items() if k != BREAKPOINT}
    return out


def with_system_breakpoint(body: dict[str, Any]) -> dict[str, Any] | None:
    """A Chat body whose system message ends with a breakpoint (its text as a part); None
    when the body has no system message to mark (Responses' ``instructions`` take none)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    first = messages[0]
    if not isinstance(first, dict) or first.get("role") not in ("system", "developer"):
        return None
    content = first.get("content")
    if isinstance(content, str):
        parts: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        parts = list(content)
    else:
        return None
    parts[-1] = {**parts[-1], BREAKPOINT: dict(EXPLICIT)}
    return {**body, "messages": [{**first, "content": parts}, *messages[1:]]}
