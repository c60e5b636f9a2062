"""Cache breakpoints of a wire body, and which of them to send when there are too many.

Anthropic (``cache_control``) and Bedrock Converse (``cachePoint``) take at most four
breakpoints a request, and refuse a one-hour entry after a five-minute one (prefix order:
tools, system, messages). The caller's hints and the cache policy's breakpoints (the stable
prefix, the conversation so far) compete for the four; :func:`choose` keeps, in this order:

1. the caller's hints, latest first (each is an explicit request);
2. the conversation's end (the longest prefix: the next turn reads all of it);
3. the end of the system prompt, then of the tools (shared by other conversations).

A breakpoint that would break the TTL order of those already kept is left out too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from metis.model.cache import RequestedCache
from metis.model.history import history_in
from metis.model.request import CanonicalRequest

MAX_BREAKPOINTS = 4

Source = Literal["hint", "conversation", "system", "tools"]
_RANK: dict[str, int] = {"hint": 0, "conversation": 1, "system": 2, "tools": 3}


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """One cache breakpoint: where it is (``path`` into the body; ``order``, its place in
    prefix order), its TTL, and who asked for it. ``where`` names it for a warning."""

    path: tuple[Any, ...]
    order: tuple[int, ...]
    ttl: str
    source: Source
    where: str


def choose(
    candidates: list[Breakpoint], limit: int = MAX_BREAKPOINTS
) -> tuple[list[Breakpoint], list[tuple[Breakpoint, str]]]:
    """The breakpoints to send (in prefix order) and those left out, each with why."""
    ranked = sorted(candidates, key=lambda b: (_RANK[b.source], tuple(-i for i in b.order)))
    kept: list[Breakpoint] = []
    dropped: list[tuple[Breakpoint, str]] = []
    for candidate in ranked:
        if len(kept) >= limit:
            dropped.append((candidate, f"the provider takes at most {limit} cache breakpoints"))
        elif any(_out_of_order(candidate, other) for other in kept):
            dropped.append((candidate, "a 1h cache entry may not follow a 5m one"))
        else:
            kept.append(candidate)
    return sorted(kept, key=lambda b: b.order), dropped


def _out_of_order(a: Breakpoint, b: Breakpoint) -> bool:
    first, then = (a, b) if a.order < b.order else (b, a)
    return first.ttl == "5m" and then.ttl == "1h"


def marker_ttl(marker: Any) -> str:
    """The TTL of a ``cache_control`` or ``cachePoint`` marker (five minutes unless said)."""
    ttl = marker.get("ttl") if isinstance(marker, dict) else None
    return ttl if isinstance(ttl, str) else "5m"


def replaced(container: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``container`` with the item at ``path`` replaced by ``value``, copying only the
    containers on the path (the rest, big image data included, is shared)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    out: Any = list(container) if isinstance(container, list) else dict(container)
    out[head] = replaced(container[head], rest, value)
    return out


def at(body: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        body = body[step]
    return body


def requested_cache(request: CanonicalRequest, call: object = None) -> RequestedCache:
    """What ``request`` asks of the cache (the encode stage hands it to the wire edits); the
    record of its messages as ``call`` has it, if given."""
    history = history_in(call, request.messages)
    hints, continuing = history.cache_hints, history.assistant
    return RequestedCache(request.cache, hints, continuing, request.session_id)
