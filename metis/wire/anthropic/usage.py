"""Anthropic's ``usage``, read as the billed totals of the request.

When Anthropic compacts the conversation (the ``compact_20260112`` edit) it samples twice in
one request, and ``usage.iterations`` lists each pass (``{type: "compaction" | "message", ...}``
with its own input, output and cache counts). The top-level counts are the sum of the
non-compaction passes only, so the compaction pass's counts are added to them here (Anthropic's
compaction docs, "Understanding usage"; anthropic-sdk-python ``BetaUsage.iterations``). A stream
may name the passes in ``message_start`` or in ``message_delta``; counts a later event leaves
out keep the passes last named.

The advisor tool (``advisor_20260301``) runs another model within the request: its passes
(``{type: "advisor_message", model, ...}``) are left out of the top-level counts too, and are
billed at that model's rates, so they are kept apart, per model, as the usage's
``other_models`` (anthropic-sdk-python ``BetaAdvisorMessageIterationUsage``).

``usage.server_tool_use`` counts the requests Anthropic's own tools made (``web_search_requests``,
``web_fetch_requests``), billed per request: kept as the usage's ``server_tools``;
``usage.service_tier`` (``standard``, ``priority``, ``batch``) as its ``service_tier``;
``usage.cache_creation.ephemeral_1h_input_tokens``, the cache writes kept an hour (billed at
twice the input rate), as its ``cache_creation_1h_input_tokens``; ``usage.speed`` (``fast``:
fast mode) and ``usage.inference_geo`` (``us``: US-only inference), each billed at a multiple
of the rates, as its ``speed`` and ``inference_geo``.
"""

from __future__ import annotations

from typing import Any

from metis.model.response import ModelUsage, ServerToolRequests, TokenUsage, UsageDetail
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.read import (
    counts_of,
    list_value,
    object_value,
    optional_text,
    required_text,
    token_count,
)

_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class UsageTally:
    """One message's usage: the top-level counts reported so far plus the compaction passes."""

    __slots__ = ("_builder", "_compaction", "_others", "_reported")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._reported: dict[str, int] = {}
        self._compaction: dict[str, int] = {}
        self._others: tuple[ModelUsage, ...] = ()

    def read(self, usage: dict[str, Any] | None) -> None:
        """Record one ``usage`` object and hand the builder the totals it makes."""
        if not usage:
            return
        builder = self._builder
        builder.usage(service_tier=service_tier(usage.get("service_tier")), **_how_run(usage))
        with counts_of(builder):
            self._counts(usage)
            builder.usage(
                server_tools=_server_tools(usage.get("server_tool_use"), builder.provider)
            )

    def _counts(self, usage: dict[str, Any]) -> None:
        provider = self._builder.provider
        for field in _COUNTS:
            if usage.get(field) is not None:
                self._reported[field] = token_count(usage[field], field, provider)
        if usage.get("iterations") is not None:
            passes = [
                object_value(entry, "usage.iterations[]")
                for entry in list_value(usage["iterations"], "usage.iterations")
            ]
            self._compaction = _summed(passes, "compaction", provider)
            self._others = _other_models(passes, provider)
        totals = {
            field: count + self._compaction.get(field, 0) for field, count in self._reported.items()
        }
        details = usage.get("output_tokens_details")  # thinking_tokens: within output_tokens
        self._builder.usage(
            input_tokens=totals.get("input_tokens"),
            output_tokens=totals.get("output_tokens"),
            cached_input_tokens=totals.get("cache_read_input_tokens"),
            cache_creation_input_tokens=totals.get("cache_creation_input_tokens"),
            reasoning_tokens=details.get("thinking_tokens") if isinstance(details, dict) else None,
            other_models=self._others,
            **_hour_writes(usage.get("cache_creation"), provider),
        )


def _how_run(usage: dict[str, Any]) -> UsageDetail:
    """``usage.speed`` and ``usage.inference_geo``, where this usage says them."""
    found = UsageDetail()
    if (speed := optional_text(usage, "speed", "usage")) is not None:
        found["speed"] = speed
    if (geo := optional_text(usage, "inference_geo", "usage")) is not None:
        found["inference_geo"] = geo
    return found


def _hour_writes(written: Any, provider: str) -> UsageDetail:
    """The cache writes kept an hour, ``usage.cache_creation.ephemeral_1h_input_tokens`` (none
    when this usage leaves it out: the counts last reported stand)."""
    if written is None:
        return {}
    hour = object_value(written, "usage.cache_creation").get("ephemeral_1h_input_tokens")
    if hour is None:
        return {}
    field = "cache_creation.ephemeral_1h_input_tokens"
    return {"cache_creation_1h_input_tokens": token_count(hour, field, provider)}


def _server_tools(counts: Any, provider: str) -> ServerToolRequests | None:
    """``usage.server_tool_use`` as counts (None when this usage leaves it out)."""
    if counts is None:
        return None
    counts = object_value(counts, "usage.server_tool_use")
    found = {
        kind: token_count(counts[f"{kind}_requests"], f"server_tool_use.{kind}_requests", provider)
        for kind in ("web_search", "web_fetch")
        if counts.get(f"{kind}_requests") is not None
    }
    return ServerToolRequests(**found)


def _summed(passes: list[dict[str, Any]], kind: str, provider: str) -> dict[str, int]:
    """The counts of the passes of type ``kind`` in ``usage.iterations``, summed (the
    ``message`` passes are the top-level counts already)."""
    summed: dict[str, int] = {}
    for item in passes:
        if item.get("type") != kind:
            continue
        for field in _COUNTS:
            value = item.get(field)
            if value is not None:
                count = token_count(value, f"usage.iterations[].{field}", provider)
                summed[field] = summed.get(field, 0) + count
    return summed


def _other_models(passes: list[dict[str, Any]], provider: str) -> tuple[ModelUsage, ...]:
    """The advisor's passes, one entry per model they name."""
    models = {
        required_text(item, "model", "usage.iterations[]")
        for item in passes
        if item.get("type") == "advisor_message"
    }
    found = []
    for model in sorted(models):
        own = [p for p in passes if p.get("type") == "advisor_message" and p["model"] == model]
        counts = _summed(own, "advisor_message", provider)
        usage = TokenUsage(
            input_tokens=counts.get("input_tokens", 0),
            output_tokens=counts.get("output_tokens", 0),
            cached_input_tokens=counts.get("cache_read_input_tokens", 0),
            cache_creation_input_tokens=counts.get("cache_creation_input_tokens", 0),
        )
        found.append(ModelUsage(model=model, usage=usage))
    return tuple(found)
