"""What one model can serve: its stack's declaration narrowed by its catalog entry.

The stack says what the API and codec can carry (a Chat Completions stack shows no reasoning,
whatever the model does); the catalog says what the model itself takes. A boolean is true only
when both say so; the context window and output limit are the model's own. A field the catalog
does not know keeps the stack's value, but for structured output and strict tools on a stack
that has them per model (Bedrock Converse), which only the models the catalog says have it get.
"""

from __future__ import annotations

from typing import Any

from metis.catalog.knobs import (
    reasoning_profile,
    refused_sampling,
    setting_rules,
    takes_system_prompt,
)
from metis.catalog.model_info import ModelInfo
from metis.model.capabilities import AdapterCapabilities
from metis.model.knobs import SAMPLING_NAMES

_NARROWED = (
    ("supports_tools", "tools"),
    ("supports_parallel_tool_calls", "parallel_tools"),
    ("supports_thinking", "reasoning"),
    ("supports_structured_output", "structured_output"),
    ("supports_strict_tools", "structured_output"),
    ("supports_prompt_caching", "prompt_caching"),
)


def model_capabilities(declared: AdapterCapabilities, info: ModelInfo) -> AdapterCapabilities:
    """``declared`` (a stack's capabilities) for the model ``info`` describes."""
    update: dict[str, Any] = {}
    images = info.takes("image")
    if images is not None:
        update["supports_images"] = declared.supports_images and images
    for field, known in _NARROWED:
        value = getattr(info, known)
        if value is not None:
            update[field] = getattr(declared, field) and bool(value)
    update.update(_media(declared, info))
    if declared.structured_output_per_model:
        has = info.structured_output is True
        update["supports_structured_output"] = declared.supports_structured_output and has
        update["supports_strict_tools"] = declared.supports_strict_tools and has
    if declared.tools_emulated:  # a prompt-and-parse shim serves tools whatever the model does
        update.pop("supports_tools", None)
    if info.context_window:
        update["max_context_tokens"] = info.max_input_tokens or info.context_window
    if info.max_output_tokens:
        update["max_output_tokens"] = info.max_output_tokens
    update.update(_knobs(declared, info))
    return declared.model_copy(update=update) if update else declared


def uncatalogued_capabilities(
    declared: AdapterCapabilities, catalog: str, wire_model: str
) -> AdapterCapabilities:
    """``declared`` for a model the catalog lacks: only what its name tells of the settings it
    refuses and of the system prompt it takes (metis/catalog/knobs.py reads those from the
    name, so a new grok-4 snapshot is known to refuse ``stop`` before the catalog lists it),
    and none of what a stack has per model (structured output and strict tools on Bedrock
    Converse)."""
    update: dict[str, Any] = {}
    named = ModelInfo(provider=catalog, id=wire_model)
    if rules := setting_rules(named):
        update["setting_rules"] = rules
    if takes_system_prompt(named) is False:
        update["supports_system_prompt"] = False
    if declared.structured_output_per_model:
        update["supports_structured_output"] = False
        update["supports_strict_tools"] = False
    return declared.model_copy(update=update) if update else declared


def _media(declared: AdapterCapabilities, info: ModelInfo) -> dict[str, Any]:
    """The file inputs ``info``'s model reads of those ``declared``: PDFs where it reads PDFs
    or images (providers show a PDF's pages as images), audio and video where it hears and
    sees them. What the catalog does not know keeps the declaration."""
    update: dict[str, Any] = {}
    if info.takes("pdf") is False and info.takes("image") is False:
        kept = [t for t in declared.accepted_document_media_types if t != "application/pdf"]
        update["accepted_document_media_types"] = kept
    for field, modality in (
        ("accepted_audio_media_types", "audio"),
        ("accepted_video_media_types", "video"),
    ):
        if info.takes(modality) is False:
            update[field] = []
    return update


def _knobs(declared: AdapterCapabilities, info: ModelInfo) -> dict[str, Any]:
    """The model's reasoning profile, whether it takes a system prompt, and the stack's
    sampling without what it refuses."""
    update: dict[str, Any] = {}
    profile = reasoning_profile(info)
    if profile is not None:
        update["reasoning"] = profile
    rules = setting_rules(info)
    if rules is not None:
        update["setting_rules"] = rules
    takes = takes_system_prompt(info)
    if takes is not None:
        update["supports_system_prompt"] = declared.supports_system_prompt and takes
    refused = refused_sampling(info)
    if refused:
        ranges = declared.sampling
        if ranges is None:
            ranges = dict.fromkeys(SAMPLING_NAMES, (None, None))
        update["sampling"] = {k: v for k, v in ranges.items() if k not in refused}
    return update
