"""What OpenAI refuses of the prompt-caching fields, per model (metis/wire/openai_cache.py has
the facts): ``prompt_cache_breakpoint`` and ``prompt_cache_options`` before gpt-5.6, the two
ways of setting a TTL together, retention ``in_memory`` on gpt-5.5 (the options' and the
breakpoints' own values are rows of the tables, after this check); and how gpt-5.6 and later
cache: only at breakpoints (OpenAI's implicit one at the end of the newest item, unless
``prompt_cache_options.mode`` is ``explicit``, and the request's explicit ones), reading the
longest prefix an earlier request wrote at one, with no lookback limit, and reporting writes
in ``cache_write_tokens``."""

from __future__ import annotations

from typing import Any

from metis.catalog.knobs import openai_cache_generation
from metis.testing.emulator.rules import Refused
from metis.wire.openai_cache import BREAKPOINT, marked_paths


def check_openai_cache(body: dict[str, Any], call: Any) -> None:
    generation = openai_cache_generation(str(body.get("model", "")))
    options = body.get("prompt_cache_options")
    marks = marked_paths(body)
    if generation != "breakpoints":
        for name, present in (("prompt_cache_options", options is not None), (BREAKPOINT, marks)):
            if present:
                message = f"Unsupported parameter: '{name}' is not supported with this model."
                raise Refused(message, name, "unsupported_parameter")
    retention = body.get("prompt_cache_retention")
    if options is not None and retention is not None:
        message = "prompt_cache_retention cannot be set with prompt_cache_options; use its ttl."
        raise Refused(message, "prompt_cache_retention", "invalid_request")
    if retention == "in_memory" and generation == "24h":
        message = "Invalid value for 'prompt_cache_retention': this model supports only '24h'."
        raise Refused(message, "prompt_cache_retention", "invalid_value")


def breakpoint_segments(model: str, items: list[Any], options: Any) -> list[int] | None:
    """The prompt segments (the tools first, then one per item) a gpt-5.6 request writes and
    reads at; None for a model that caches every prefix."""
    if openai_cache_generation(model) != "breakpoints":
        return None
    marks = {item + 1 for _, item, _ in marked_paths({"input": list(items)})}
    explicit_only = isinstance(options, dict) and options.get("mode") == "explicit"
    if items and not explicit_only:
        marks.add(len(items))
    return sorted(marks)
