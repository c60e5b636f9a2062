"""A Responses reply's token counts (``response.usage``), as canonical usage."""

from __future__ import annotations

from typing import Any

from metis.wire.builder import MessageBuilder
from metis.wire.read import audio_counts, object_value, split_input, token_count


def read_counts(builder: MessageBuilder, usage: dict[str, Any]) -> None:
    """Canonical input counts uncached input only; OpenAI's ``input_tokens`` counts it all."""
    details = object_value(usage.get("input_tokens_details") or {}, "usage.input_tokens_details")
    provider = builder.provider
    cached = token_count(details.get("cached_tokens") or 0, "cached_tokens", provider)
    written = token_count(details.get("cache_write_tokens") or 0, "cache_write_tokens", provider)
    total = token_count(usage.get("input_tokens") or 0, "input_tokens", provider)
    uncached, cached, written = split_input(total, cached, written)
    detail = object_value(usage.get("output_tokens_details") or {}, "usage.output_tokens_details")
    builder.usage(
        input_tokens=uncached,
        output_tokens=usage.get("output_tokens") or 0,
        cached_input_tokens=cached,
        cache_creation_input_tokens=written,
        reasoning_tokens=detail.get("reasoning_tokens") or 0,
        **audio_counts(details, detail, provider),
    )
