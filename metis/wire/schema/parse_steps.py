"""Steps of the schema parser (parse.py) that need only the reading and the builder."""

from __future__ import annotations

from typing import Any

from metis.model.content import Base64ImageSource, ImageBlock
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.read import counts_of, malformed, modality_audio, split_input
from metis.wire.schema.compiled import Reading


def read_usage(r: Reading, usage: dict[str, Any], builder: MessageBuilder) -> None:
    """A response's (or the last chunk's) usage, given to ``builder``."""
    with counts_of(builder):
        tokens = r.input_tokens(usage)
        cached = r.cached(usage)
        created = r.created(usage)
        if tokens is not None and r.schema.input_includes_cached:
            tokens, cached, created = split_input(tokens, cached or 0, created or 0)
        builder.usage(tokens, r.output_tokens(usage), cached, created, r.reasoning(usage))
        if r.modality_counts is not None:
            builder.usage(**modality_audio(usage, r.modality_counts, builder.provider))
    tier = next((usage[key] for key in r.service_tier if key in usage), None)
    builder.usage(service_tier=service_tier(tier))


def image_of(r: Reading, part: dict[str, Any], where: str) -> ImageBlock | None:
    """The image ``part`` holds (an image model's picture); None for other media."""
    media_of, data_of = r.image
    media_type = media_of(part) if media_of is not None else None
    data = data_of(part) if data_of is not None else None
    if not (isinstance(media_type, str) and media_type.startswith("image/")):
        return None
    if data.__class__ is not str:
        raise malformed(f"{where} image data", "a string", data)
    return ImageBlock(source=Base64ImageSource(media_type=media_type, data=data))


def report_dropped(
    name: str, r: Reading, builder: MessageBuilder, seen: set[str], obj: Any, envelope: Any
) -> None:
    """One WARN for each field with no canonical form, the first time it is there."""
    for field, scoped, get, block_type in r.dropped:
        if field not in seen and get(envelope if scoped else obj):
            seen.add(field)
            builder.warn(
                block_type,
                f"{name} {block_type!r} has no canonical form",
                message_id=builder.message_id,
            )


def thinking(r: Reading, part: dict[str, Any], builder: MessageBuilder, where: str) -> bool:
    """A thinking part's text and signature given to ``builder``; False when it had neither."""
    text = r.thinking_value(part)
    if text.__class__ is not str:
        raise malformed(f"{where} thinking", "a string", text)
    if text:
        builder.thinking("thinking", text)
    signature = r.thinking_signature(part) if r.thinking_signature is not None else None
    if signature:
        if signature.__class__ is not str:
            raise malformed(f"{where} signature", "a string", signature)
        builder.thinking_signature("thinking", signature)
    return bool(text or signature)
