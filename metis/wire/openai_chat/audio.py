"""An audio reply (``modalities: ["text", "audio"]``): the message's ``audio`` (``id``, base64
``data``, ``transcript``, ``expires_at``) has no canonical form, so it is kept whole as an
opaque block of kind ``audio`` (docs/contract.md §8). Streamed, ``delta.audio`` pieces add up:
``transcript`` and ``data`` are appended, the other fields replaced. It goes back to the same
provider as the assistant message's ``audio``, by its id (the provider keeps the sound)."""

from __future__ import annotations

from typing import Any

from metis.model.content import OpaqueBlock
from metis.wire.builder import MessageBuilder
from metis.wire.read import object_value

AUDIO = "audio"
"""The kind of the block, and its place: the assistant message's ``audio``."""
_KEY = ("audio",)
_ADDED = ("transcript", "data")


def read_audio(builder: MessageBuilder, value: Any, held: dict[str, Any], where: str) -> None:
    """A message's ``audio`` (or a delta's piece of it, added to ``held``). The block takes
    its place with the first piece; a stream's whole is given it at the end (:func:`kept_audio`),
    not at every piece, which would go over the growing sound again each time."""
    first = not held
    value = object_value(value, f"{where}.audio")
    if not any(value.values()):  # Snowflake Cortex's unused audio: every field "" or 0
        return
    for key, field in value.items():
        before = held.get(key)
        if key in _ADDED and isinstance(before, str) and isinstance(field, str):
            held[key] = before + field
        else:
            held[key] = field
    if first:
        builder.opaque(_KEY, AUDIO, held, place=AUDIO)


def kept_audio(builder: MessageBuilder, held: dict[str, Any]) -> None:
    """A streamed reply's audio, whole, once the stream ends."""
    if held:
        builder.opaque(_KEY, AUDIO, held, place=AUDIO)


def audio_reference(item: dict[str, Any]) -> dict[str, Any]:
    """The kept ``audio`` as a later turn names it: by its id only."""
    return {"id": item.get("id")}


def is_audio(block: OpaqueBlock, place: str | None) -> bool:
    return place == AUDIO and block.kind == AUDIO
