"""Where the catalog's sources are wrong about a model: the fields metis corrects, each with
where the right values come from (docs/catalog.md "Corrections").

A correction is applied to an entry whenever a snapshot is read (the packaged one, a refreshed
one, ``METIS_CATALOG``'s), so a refresh that brings the error back does not undo it; a
models.yaml ``catalog:`` block still wins over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Correction:
    fields: Mapping[str, Any]
    source: str


CORRECTIONS: Mapping[str, Correction] = {
    "amazon-bedrock/amazon.nova-2-lite-v1:0": Correction(
        {
            "context_window": 1_000_000,
            "max_output_tokens": 64_000,
            "reasoning": True,
            "reasoning_form": "effort",
            "prices": {"input": "0.33", "output": "2.75", "cache_read": "0.0825"},
        },
        "models.dev gives this id (which the us. and eu. profiles resolve to) no reasoning, a "
        "128k context and 4k output. Amazon's own entry for the model (models.dev's "
        "nova:nova-2-lite-v1) and genai-prices' for the global. profile say 1M context, and "
        "Amazon's 64k output and reasoning; Converse asks for it with "
        "additionalModelRequestFields.reasoningConfig.maxReasoningEffort (low, medium, high). "
        "Its prices came from models.dev, without the cache reads: genai-prices 0.2.3's "
        "regional.amazon.nova-2-lite-v1:0 (the us., eu. and jp. profiles) has $0.33 in, "
        "$2.75 out and $0.0825 cached (a quarter of the input rate), so a cached read was "
        "priced at the whole input rate.",
    ),
    "amazon-bedrock/global.amazon.nova-2-lite-v1:0": Correction(
        {"max_output_tokens": 64_000, "reasoning": True, "reasoning_form": "effort"},
        "genai-prices, this entry's only source, gives it prices and a 1M context alone: the "
        "model's output limit and reasoning are those of the entry above (the same model, "
        "served from any region at $0.30 in, $2.50 out, $0.075 cached).",
    ),
    "openai/gpt-5-chat-latest": Correction(
        {"reasoning": False, "reasoning_form": None},
        "models.dev says it reasons (an effort); it is ChatGPT's model without reasoning, and "
        "OpenAI refused a reasoning effort for it (vkryukov/req_llm's "
        'openai/gpt_5_chat_latest/reasoning_basic.json fixture: 400 "Unsupported parameter: '
        "'reasoning.effort' is not supported with this model.\").",
    ),
    "openai/gpt-3.5-turbo": Correction(
        {"tools": True, "parallel_tools": True},
        "models.dev says no tool calling; OpenAI's function calling guide lists gpt-3.5-turbo, "
        "and the snapshot it names (gpt-3.5-turbo-0125) takes parallel calls.",
    ),
}
"""Corrections by the entry's key, ``provider/id``."""


def corrected(key: str, raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``raw`` (a snapshot's entry) with its correction, if it has one."""
    correction = CORRECTIONS.get(key)
    return raw if correction is None else {**raw, **correction.fields}
