"""The ``cache_control`` stage's OpenAI form (Chat Completions and Responses; docs/caching.md,
metis/wire/openai_cache.py has the wire facts).

- Every model: ``prompt_cache_key`` (the policy's key, else the session id) where the stack
  says ``key: true``.
- Before gpt-5.6: ``prompt_cache_retention`` as the policy asks (gpt-5.5 keeps ``24h`` only:
  ``in_memory`` is left out, with a warning); a cache hint has no form (a warning).
- gpt-5.6 and later: the caller's hints on text went as ``prompt_cache_breakpoint`` (the
  encoder marks them); the policy's stable prefix adds one at the end of the Chat system
  message; at most three are kept (the caller's, latest first, then the system prompt's), and
  OpenAI's own implicit breakpoint caches the conversation. Retention has no effect there: it
  is left out, with a warning, as is a hint on a block that is not text.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from typing import Any

from metis.model.cache import CachePolicy, RequestedCache
from metis.pipeline.call import Call
from metis.wire import openai_cache

log = logging.getLogger("metis")

MAX_PROMPT_CACHE_KEY = 64


def openai_cache_edit(
    body: dict[str, Any], asked: RequestedCache, call: Call, *, key: bool, system: bool
) -> dict[str, Any]:
    """``body`` with the request's cache settings in OpenAI's form; ``key``: the stack sends
    the key and retention; ``system``: the stack's default policy caches the system prompt."""
    from metis.catalog.knobs import openai_cache_generation  # loads with the first call

    generation = openai_cache_generation(call.wire_model)
    policy = asked.policy
    if generation == "breakpoints":
        prefix = policy.prefix if policy is not None else system
        body = _breakpoints(body, asked, call, prefix)
    else:
        for _ in range(asked.hints):
            _warn(call, "OpenAI has no form for a cache hint (docs/caching.md)")
    if policy is not None and policy.cached_content:
        _warn(call, "OpenAI cannot read a Gemini cached content; it was not used")
    if not key:
        return body
    return _fields(body, policy or _no_policy(), asked.session_id, generation, call)


def _breakpoints(
    body: dict[str, Any], asked: RequestedCache, call: Call, prefix: bool
) -> dict[str, Any]:
    hints = openai_cache.marked_paths(body)
    for _ in range(max(0, asked.hints - len(hints))):
        _warn(call, "OpenAI takes a cache breakpoint on text only; a hint elsewhere was not sent")
    kept = hints[-openai_cache.MAX_EXPLICIT :]
    dropped = hints[: len(hints) - len(kept)]
    for where in dropped:
        _warn(call, f"cache breakpoint on {_shown(where)} not sent: OpenAI writes at most three")
    body = openai_cache.unmarked(body, dropped) if dropped else body
    if prefix and len(kept) < openai_cache.MAX_EXPLICIT:
        return openai_cache.with_system_breakpoint(body) or body
    if prefix and openai_cache.with_system_breakpoint(body) is not None:
        message = "cache breakpoint on the system prompt not sent: OpenAI writes at most three"
        if asked.policy is not None:
            _warn(call, message)
        else:
            log.debug("cache_control: %s", message)
    return body


def _fields(
    body: dict[str, Any],
    policy: CachePolicy,
    session_id: str | None,
    generation: str | None,
    call: Call,
) -> dict[str, Any]:
    if not policy.prefix and policy.conversation is False:
        return body
    fields: dict[str, Any] = {}
    key = policy.key or session_id
    if key:
        fields["prompt_cache_key"] = _bounded(key)
    retention = policy.retention
    if retention and generation == "breakpoints":
        _warn(call, "prompt_cache_retention has no effect from gpt-5.6 (its TTL is OpenAI's)")
    elif retention == "in_memory" and generation == "24h":
        _warn(call, "gpt-5.5 keeps prompt caches 24h only; retention in_memory was not sent")
    elif retention:
        fields["prompt_cache_retention"] = retention
    return {**body, **fields} if fields else body


@functools.cache
def _no_policy() -> CachePolicy:
    """The policy of a request that asks none (a frozen model: made once, not per call)."""
    return CachePolicy()


def _bounded(key: str) -> str:
    """OpenAI refuses a ``prompt_cache_key`` over 64 characters: a longer session id or key
    is sent as a digest of itself (the same key, the same digest: affinity holds)."""
    if len(key) <= MAX_PROMPT_CACHE_KEY:
        return key
    return "metis-" + hashlib.sha256(key.encode()).hexdigest()[: MAX_PROMPT_CACHE_KEY - 6]


def _shown(where: tuple[str, int, int]) -> str:
    key, item, part = where
    return f"{key}[{item}].content[{part}]"


def _warn(call: Call, reason: str) -> None:
    call.warn_dropped("cache", reason)
