"""Cache markers as Anthropic and Bedrock read them: the breakpoint limit, where the
breakpoints are, and the prompt without them (a marker is not part of the cached prefix:
moving the breakpoint to the next turn's last message keeps the earlier prefix the same)."""

from __future__ import annotations

from typing import Any

from metis.testing.emulator.rules import Refused

MAX_BREAKPOINTS = 4
MAX_PROMPT_CACHE_KEY = 64
"""OpenAI refuses a longer ``prompt_cache_key`` (Chat Completions and Responses)."""


def unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` fields and ``cachePoint`` blocks."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value if not (isinstance(v, dict) and "cachePoint" in v)]
    return value


def _content(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _marked(block: Any) -> int:
    if not isinstance(block, dict):
        return 0
    nested = block.get("content")
    inner = sum(_marked(b) for b in nested) if isinstance(nested, list) else 0
    return (block.get("cache_control") is not None) + inner  # null marks nothing


def anthropic_breakpoints(body: dict[str, Any]) -> int:
    """How many ``cache_control`` markers a Messages body carries."""
    count = sum(_marked(t) for t in body.get("tools") or [])
    system = body.get("system")
    count += sum(_marked(b) for b in system) if isinstance(system, list) else 0
    count += sum(_marked(b) for m in body.get("messages") or [] for b in _content(m))
    return count + (body.get("cache_control") is not None)


def check_breakpoint_limit(body: dict[str, Any], call: Any) -> None:
    """Anthropic refuses a fifth ``cache_control`` (its words)."""
    count = anthropic_breakpoints(body)
    if count > MAX_BREAKPOINTS:
        raise Refused(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {count}."
        )


def converse_breakpoints(body: dict[str, Any]) -> list[int]:
    """The prompt segments (tools and system, then one per message) a ``cachePoint`` ends."""
    config = body.get("toolConfig")
    tools = config.get("tools") if isinstance(config, dict) else None
    prefix = [*(tools or []), *(body.get("system") or [])]
    found = [0] if any(isinstance(b, dict) and "cachePoint" in b for b in prefix) else []
    for i, message in enumerate(body.get("messages") or []):
        if any(isinstance(b, dict) and "cachePoint" in b for b in _content(message)):
            found.append(i + 1)
    return found


def block_counts(messages: list[Any]) -> list[int]:
    """Blocks per prompt segment (the tools and system count as one), for the lookback."""
    return [1, *(max(1, len(_content(m))) for m in messages)]


def check_prompt_cache_key(body: dict[str, Any], call: Any) -> None:
    """OpenAI's refusal of a ``prompt_cache_key`` over 64 characters (its words)."""
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and len(key) > MAX_PROMPT_CACHE_KEY:
        raise Refused(
            "Invalid 'prompt_cache_key': string too long. Expected a string with maximum "
            f"length {MAX_PROMPT_CACHE_KEY}, but got a string with length {len(key)} instead.",
            "prompt_cache_key",
            "string_above_max_length",
        )
