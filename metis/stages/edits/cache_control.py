"""The ``cache_control`` stage: Anthropic prompt caching for the stable prefix of a call.

On an Anthropic Messages body it marks the system prompt (its last block; a plain string
becomes one text block) and the last tool definition with ``cache_control``, so the tools and
system prompt are read from the cache on the next call instead of billed again in full.

Anthropic takes at most four cache breakpoints a request, and a one-hour entry may not follow
a five-minute one. The caller's own markers (anywhere in system, tools or message content)
count against the limit; a marker this stage would add past it, or out of TTL order, is left
out with a DEBUG record. The caller's markers are never changed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import RequestStage

log = logging.getLogger("metis")

MAX_BREAKPOINTS = 4


class CacheControl(RequestStage[WireRequest]):
    name = "cache_control"
    role = "edit"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        system: bool = True
        tools: bool = True
        ttl: Literal["5m", "1h"] | None = None

    options: Options

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        body = request.body
        marker: dict[str, Any] = {"type": "ephemeral"}
        if self.options.ttl is not None:
            marker["ttl"] = self.options.ttl
        ttl = self.options.ttl or "5m"

        tools_ttls = _ttls(body.get("tools"))
        system_ttls = _ttls(body.get("system"))
        message_ttls = [t for m in _list(body.get("messages")) for t in _message_ttls(m)]
        used = len(tools_ttls) + len(system_ttls) + len(message_ttls)
        new_body: dict[str, Any] | None = None

        # The system breakpoint first: its prefix includes the tools, so when only one
        # breakpoint is left it caches the most.
        if self.options.system:
            system = _marked_system(body.get("system"), marker)
            if system is not None and self._fits(
                used, ttl, tools_ttls, message_ttls, "system prompt", call
            ):
                new_body = {**body, "system": system}
                used += 1

        if self.options.tools:
            tools = _marked_tools(body.get("tools"), marker)
            later = [*system_ttls, *message_ttls]
            if tools is not None and self._fits(
                used, ttl, tools_ttls, later, "tool definitions", call
            ):
                new_body = {**(new_body or body), "tools": tools}
                used += 1

        if new_body is None:
            return request
        return dataclasses.replace(request, body=new_body)

    @staticmethod
    def _fits(
        used: int, ttl: str, earlier: list[str], later: list[str], what: str, call: Call
    ) -> bool:
        if used >= MAX_BREAKPOINTS:
            log.debug(
                "cache_control: not caching the %s: the request already has %d of %d "
                "cache breakpoints",
                what,
                used,
                MAX_BREAKPOINTS,
            )
            return False
        if (ttl == "5m" and "1h" in later) or (ttl == "1h" and "5m" in earlier):
            log.debug(
                "cache_control: not caching the %s: a %s breakpoint there would put a 5m "
                "breakpoint before a 1h one",
                what,
                ttl,
            )
            return False
        return True


def _marked_system(system: Any, marker: dict[str, Any]) -> list[Any] | None:
    """The system prompt with a breakpoint on its last block, or None to leave it alone."""
    if isinstance(system, str):
        if not system:
            return None
        return [{"type": "text", "text": system, "cache_control": dict(marker)}]
    if isinstance(system, list) and system and isinstance(system[-1], dict):
        if "cache_control" in system[-1]:
            return None  # the caller placed it already
        return [*system[:-1], {**system[-1], "cache_control": dict(marker)}]
    return None


def _marked_tools(tools: Any, marker: dict[str, Any]) -> list[Any] | None:
    """The tools with a breakpoint on the last one, or None to leave them alone."""
    if not isinstance(tools, list) or not tools or not isinstance(tools[-1], dict):
        return None
    if "cache_control" in tools[-1]:
        return None
    return [*tools[:-1], {**tools[-1], "cache_control": dict(marker)}]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ttl(block: Any) -> list[str]:
    if isinstance(block, dict):
        marker = block.get("cache_control")
        if isinstance(marker, dict):
            return [str(marker.get("ttl") or "5m")]
    return []


def _ttls(blocks: Any) -> list[str]:
    """The TTLs of the cache markers on a list of blocks (tools, system blocks, content),
    including those on the content of a tool result."""
    found: list[str] = []
    for block in _list(blocks):
        found += _ttl(block)
        if isinstance(block, dict) and isinstance(block.get("content"), list):
            found += _ttls(block["content"])
    return found


def _message_ttls(message: Any) -> list[str]:
    if not isinstance(message, dict):
        return []
    return _ttls(message.get("content"))
