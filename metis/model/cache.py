"""Prompt caching in metis's own terms (docs/caching.md): a hint on a message or block, and a
request-level policy that says which parts of the prompt to cache.

A provider caches a *prefix* of the prompt (tools, then system, then the messages in order). A
:class:`CacheHint` asks for a cache entry to end at one message or block; a
:class:`CachePolicy` asks for entries at the end of the stable prefix (system prompt, tools)
and at the end of the conversation so far, so that the next turn of an agent loop reads this
one from the cache. Each provider stack maps them to its own form (``cache_control``,
``cachePoint``, ``prompt_cache_key``, ``cachedContent``) or, where it has none, lists the hint
in the result's ``warnings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from metis.model.base import Canonical
from metis.model.knobs import CacheTTL as CacheTTL

CACHED_CONTENT_NAME = r"^(projects/[^/\s]+/locations/[^/\s]+/)?cachedContents/[^/\s]+$"
"""A Gemini API cached content, or a Vertex AI one (``projects/.../locations/.../...``)."""


class CacheHint(Canonical):
    """Cache the prompt up to and including this message or block. ``ttl`` where the
    provider takes one (Anthropic, Bedrock Claude: ``5m`` or ``1h``); None: the provider's
    default (five minutes)."""

    ttl: CacheTTL | None = None


class CachePolicy(Canonical):
    """Which parts of a request to cache, for every provider of a route.

    - ``prefix``: the stable prefix, system prompt and tools.
    - ``conversation``: the conversation so far (a breakpoint on its last message), so turn
      N+1 reads turn N from the cache. ``"auto"`` (the default) caches it when the request
      continues a conversation (its history has an assistant turn), not on a first call,
      whose cache write (1.25x the input price on Anthropic) no later call may read.
    - ``ttl``: the entries' lifetime where the provider takes one (``5m``, ``1h``).
    - ``key``: OpenAI's ``prompt_cache_key`` (routes calls with the same key to the same
      cache); None: the request's session id.
    - ``retention``: OpenAI's ``prompt_cache_retention`` (``in_memory`` or ``24h``).
    - ``cached_content``: a Gemini explicit cache (``cachedContents/...``) the request reads;
      its system prompt and tools are those of the cached content.

    :meth:`off` caches nothing a request could ask for (a provider's implicit cache still
    works: it takes no request).
    """

    prefix: bool = True
    conversation: bool | Literal["auto"] = "auto"
    ttl: CacheTTL | None = None
    key: str | None = Field(default=None, min_length=1, max_length=1024)
    retention: Literal["in_memory", "24h"] | None = None
    cached_content: str | None = Field(default=None, pattern=CACHED_CONTENT_NAME)

    @classmethod
    def off(cls) -> CachePolicy:
        """Cache nothing a request could ask for (a provider's implicit cache still works)."""
        return cls(prefix=False, conversation=False)


@dataclass(frozen=True, slots=True)
class RequestedCache:
    """What a request asks of the cache, as the wire edits see it (the canonical request is
    behind them): its policy (None: the stack's default), how many hints its messages carry,
    whether it continues a conversation (for ``conversation="auto"``), and its session."""

    policy: CachePolicy | None = None
    hints: int = 0
    continuing: bool = False
    session_id: str | None = None

    def caches_conversation(self, policy: CachePolicy) -> bool:
        if policy.conversation == "auto":
            return self.continuing
        return policy.conversation


class CachedContent(Canonical):
    """A Gemini explicit cache (docs/caching.md): a stored prompt prefix that requests read
    by its ``name`` (``CachePolicy(cached_content=name)``), billed for its storage until it
    expires or is deleted."""

    name: str = Field(pattern=CACHED_CONTENT_NAME)
    model: str
    """The model it was made for: only that model reads it."""
    expire_time: str | None = None
    token_count: int | None = None
    """The tokens cached: what each request reading it is billed at the cached rate."""
    display_name: str | None = None
