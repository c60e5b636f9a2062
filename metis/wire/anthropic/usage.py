"""Anthropic's ``usage``, read as the billed totals of the request.

When Anthropic compacts the conversation (the ``compact_20260112`` edit) it samples twice in
one request, and ``usage.iterations`` lists each pass (``{type: "compaction" | "message", ...}``
with its own input, output and cache counts). The top-level counts are the sum of the
non-compaction passes only, so the compaction pass's counts are added to them here (Anthropic's
compaction docs, "Understanding usage"; anthropic-sdk-python ``BetaUsage.iterations``). A stream
may name the passes in ``message_start`` or in ``message_delta``; counts a later event leaves
out keep the passes last named.
"""

from __future__ import annotations

from typing import Any

from metis.wire.builder import MessageBuilder
from metis.wire.read import list_value, object_value, token_count

_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class UsageTally:
    """One message's usage: the top-level counts reported so far plus the compaction passes."""

    __slots__ = ("_builder", "_compaction", "_reported")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._reported: dict[str, int] = {}
        self._compaction: dict[str, int] = {}

    def read(self, usage: dict[str, Any] | None) -> None:
        """Record one ``usage`` object and hand the builder the totals it makes."""
        if not usage:
            return
        provider = self._builder.provider
        for field in _COUNTS:
            if usage.get(field) is not None:
                self._reported[field] = token_count(usage[field], field, provider)
        if usage.get("iterations") is not None:
            self._compaction = _compaction_counts(usage["iterations"], provider)
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
        )


def _compaction_counts(iterations: Any, provider: str) -> dict[str, int]:
    """The counts of the ``compaction`` passes in ``usage.iterations``, summed."""
    summed: dict[str, int] = {}
    for entry in list_value(iterations, "usage.iterations"):
        item = object_value(entry, "usage.iterations[]")
        if item.get("type") != "compaction":
            continue  # the message passes are the top-level counts already
        for field in _COUNTS:
            value = item.get(field)
            if value is not None:
                count = token_count(value, f"usage.iterations[].{field}", provider)
                summed[field] = summed.get(field, 0) + count
    return summed
