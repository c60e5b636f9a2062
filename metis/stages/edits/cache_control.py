"""The ``cache_control`` stage: the request's cache policy (docs/caching.md), in the form of
the stack's wire dialect. Every provider stack has it (the skeleton adds it after ``encode``).

- Anthropic (and Claude on Bedrock InvokeModel and Vertex): ``cache_control`` breakpoints on
  the last tool, the system prompt and the conversation's last block, within the four a
  request takes, beside the caller's hints (metis.wire.cache_points says which are kept).
- Bedrock Converse: ``cachePoint`` blocks at the same places, on the models the catalog says
  cache; on the others the caller's hints are taken out, with a warning.
- OpenAI: ``prompt_cache_key`` and retention (a stack that says ``key: true``), and from
  gpt-5.6 ``prompt_cache_breakpoint`` on the caller's hints and the system prompt
  (metis/stages/edits/openai_cache.py); it caches prefixes itself.
- Gemini: implicit caching needs nothing; a policy's ``cached_content`` becomes
  ``cachedContent``, and the request then carries no system prompt or tools (Gemini refuses
  both beside it): quietly when they are what the cache holds, else with a warning
  (:func:`metis.wire.schema.cached_contents.left_out`).
- Everything else caches implicitly, or not at all.

A hint the provider has no form for, and a policy setting it cannot apply, are listed in the
result's warnings. The caller's own markers are never moved; they are left out only past the
provider's limit, with a warning.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from types import ModuleType
from typing import Any, Literal

from metis.model.cache import CachePolicy, CacheTTL, RequestedCache
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import RequestStage
from metis.stages.edits.openai_cache import openai_cache_edit
from metis.stages.options import CacheControlOptions, rules_dialect
from metis.wire import cache_points

log = logging.getLogger("metis")

MAX_BREAKPOINTS = cache_points.MAX_BREAKPOINTS
BEDROCK_CATALOG = "amazon-bedrock"

_FORMS = {
    "anthropic": "anthropic",
    "bedrock_anthropic": "anthropic",
    "bedrock_converse": "converse",
    "openai_chat": "openai",
    "openai_responses": "openai",
    "gemini": "gemini",
}


class CacheControl(RequestStage[WireRequest]):
    name = "cache_control"
    role = "edit"
    dialect_option = "rules"

    Options = CacheControlOptions

    options: CacheControlOptions

    @classmethod
    def dialect(cls, options: dict[str, Any]) -> str | None:
        return rules_dialect(options)

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        asked = request.cache or RequestedCache()
        form = _FORMS.get(self.options.rules or "anthropic", "implicit")
        body = request.body
        if form in ("anthropic", "converse"):
            body = self._breakpoints(body, asked, form, call)
        else:
            body = self._no_breakpoints(body, asked, form, call)
        if body is request.body:
            return request
        return dataclasses.replace(request, body=body, content=None)

    def _policy(self, asked: RequestedCache) -> tuple[CachePolicy, bool, bool]:
        """The policy in force, and whether it caches the system prompt and the tools."""
        if asked.policy is not None:
            return asked.policy, asked.policy.prefix, asked.policy.prefix
        o = self.options
        return _default_policy(o.conversation, o.ttl), o.system, o.tools

    def _breakpoints(
        self, body: dict[str, Any], asked: RequestedCache, form: str, call: Call
    ) -> dict[str, Any]:
        policy, system, tools = self._policy(asked)
        wire = _anthropic_cache() if form == "anthropic" else _converse_cache()
        if form == "converse" and not self._caches(call):
            hints = wire.present(body)
            for _ in hints:
                _warn(call, f"{call.wire_model} has no prompt caching on Bedrock (model catalog)")
            return wire.settled(body, [], hints, None) if hints else body
        conversation = asked.caches_conversation(policy)
        wanted = wire.policy_points(
            body, policy.ttl, system=system, tools=tools, conversation=conversation
        )
        present = wire.present(body)
        kept, dropped = cache_points.choose(present + wanted)
        for point, why in dropped:
            message = f"cache breakpoint on {point.where} not sent: {why}"
            if point.source == "hint" or asked.policy is not None:
                _warn(call, message)
            else:
                log.debug("cache_control: %s", message)
        added = [p for p in kept if p.source != "hint"]
        removed = [p for p, _ in dropped if p.source == "hint"]
        _no_form_for_policy(asked, call, "Bedrock" if form == "converse" else "Anthropic")
        if not added and not removed:
            return body
        settled: dict[str, Any] = wire.settled(body, added, removed, policy.ttl)
        return settled

    def _no_breakpoints(
        self, body: dict[str, Any], asked: RequestedCache, form: str, call: Call
    ) -> dict[str, Any]:
        if form == "openai":
            o = self.options
            return openai_cache_edit(body, asked, call, key=o.key, system=o.system)
        provider = "Gemini" if form == "gemini" else call.provider
        for _ in range(asked.hints):
            _warn(call, f"{provider} has no form for a cache hint (docs/caching.md)")
        policy = asked.policy
        if form == "gemini" and policy is not None and policy.cached_content:
            from metis.wire.schema.cached_contents import NOT_BESIDE, left_out

            for reason in left_out(body, policy.cached_content):
                _warn(call, reason)
            out = {k: v for k, v in body.items() if k not in NOT_BESIDE}
            return {**out, "cachedContent": policy.cached_content}
        _no_form_for_policy(asked, call, provider)
        return body

    @staticmethod
    def _caches(call: Call) -> bool:
        """Converse caches on the models the catalog says do (Claude, Nova); an unknown model
        may refuse a ``cachePoint``."""
        from metis.catalog.lookup import find_model  # the catalog loads with the first call

        info = find_model(BEDROCK_CATALOG, call.wire_model)
        return info is not None and info.prompt_caching is True


@functools.lru_cache(maxsize=64)
def _default_policy(conversation: bool | Literal["auto"], ttl: CacheTTL | None) -> CachePolicy:
    """A stack's own policy (a frozen model of two plain values: made once, not per call)."""
    return CachePolicy(conversation=conversation, ttl=ttl)


def _no_form_for_policy(asked: RequestedCache, call: Call, provider: str) -> None:
    """A Gemini cached content asked of another provider is not applied: said in warnings."""
    if asked.policy is not None and asked.policy.cached_content:
        _warn(call, f"{provider} cannot read a Gemini cached content; it was not used")


def _warn(call: Call, reason: str) -> None:
    call.warn_dropped("cache", reason)


def _anthropic_cache() -> ModuleType:
    """Anthropic's cache form: its codec package is loaded only by a stack that writes that
    form (an OpenAI stack's cache_control does not load it)."""
    from metis.wire.anthropic import cache

    return cache


def _converse_cache() -> ModuleType:
    """Bedrock Converse's cache form: its codec package is loaded only by a stack that
    writes that form."""
    from metis.wire.bedrock_converse import cache

    return cache
