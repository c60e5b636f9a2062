"""Which file blocks the routed model can read, and what becomes of the others (docs/contract.md
§9).

In the turn being sent (the messages after the last assistant message) a document, audio or
video block the model cannot read is an unmet need, which ``capability_check`` refuses with a
CapabilityError before anything is sent. In an older turn (a history that moved here from a
model that could read it) the block, or an image the model cannot see, is dropped whole, with
the lossy-projection WARN, and listed in the call's warnings. A block given as a file id that
another provider's Files API issued is treated the same way: the id names nothing here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from metis.model.capabilities import AdapterCapabilities
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    Role,
    ToolResultBlock,
)
from metis.model.history import History, history_of
from metis.model.media import AudioBlock, DocumentBlock, FileIdSource, MediaBlock, VideoBlock
from metis.model.request import CanonicalRequest

Drop = Callable[[str, str, str | None], None]
"""``drop(block_type, reason, message_id)``: the lossy-projection WARN for one dropped block
(no message id: for a setting of the request's own)."""

SHARED_FILES = {"openai_responses": "openai", "azure_responses": "azure"}
"""Stacks that reach the same Files API as another stack (the same platform and account)."""

_VISIBLE = (ImageBlock, DocumentBlock, AudioBlock, VideoBlock)
"""What an older turn may hold that a model cannot read (the turn sent: files here, images in
``capability_check``'s own needs)."""

_ALIASES = {
    "audio/mp3": "audio/mpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "text/md": "text/markdown",
    "text/x-markdown": "text/markdown",
}


def current_turn_start(messages: Sequence[Message]) -> int:
    """Where the turn being sent starts: after the last assistant message (0 when none)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role is Role.ASSISTANT:
            return i + 1
    return 0


def same_files(issuer: str, provider: str) -> bool:
    """Whether a file id ``issuer``'s Files API issued names a file for ``provider`` too."""
    return SHARED_FILES.get(issuer, issuer) == SHARED_FILES.get(provider, provider)


def unreadable(
    block: MediaBlock | ImageBlock, caps: AdapterCapabilities, provider: str
) -> str | None:
    """Why the model behind ``caps`` (on ``provider``) cannot read ``block``; None if it can."""
    source = block.source
    if isinstance(source, FileIdSource) and not same_files(source.provider, provider):
        return (
            f"its file id was issued by {source.provider}, and names no file on {provider} "
            f"(upload the file to {provider}'s Files API, or give it inline, for this model "
            "to read it)"
        )
    if isinstance(block, ImageBlock):
        return _unseen(block, caps)
    accepted = _accepted(block, caps)
    noun = block.type
    if not accepted:
        return f"the model takes no {noun} input"
    media_type = block.media_type()
    if media_type is not None and _canonical(media_type) not in accepted:
        return f"the model takes no {media_type} {noun} (it takes {', '.join(sorted(accepted))})"
    return None


def fit_media(
    request: CanonicalRequest,
    caps: AdapterCapabilities,
    provider: str,
    drop: Drop,
    history: History | None = None,
) -> tuple[CanonicalRequest, list[str]]:
    """``request`` with the unreadable file blocks of older turns dropped (each with ``drop``),
    and the unmet needs of the turn being sent, one per unreadable block. ``history``: the
    record of its messages, when the caller has it."""
    history = history or history_of(request.messages)
    fits = ("fit_media", id(caps), provider)
    if not history.media_at or history.found(fits) is caps:
        return request, []
    start = current_turn_start(request.messages)
    problems: list[str] = []
    messages = list(request.messages)
    changed = False
    for i in history.media_at:
        message = messages[i]
        where = message.id or f"messages[{i}]"
        if i >= start:
            facts = history.facts[i]
            named = any(isinstance(image.source, FileIdSource) for image in facts.images)
            problems += _needs(message, where, caps, provider) if facts.files or named else []
        else:
            messages[i] = _readable(message, where, caps, provider, drop)
            changed = changed or messages[i] is not message
    if not changed:
        if not problems:  # nothing dropped, nothing unmet: so on every call with these caps
            history.keep(fits, caps)
        return request, problems
    return request.model_copy(update={"messages": messages}), problems


def _needs(message: Message, where: str, caps: AdapterCapabilities, provider: str) -> list[str]:
    problems = []
    for j, block in enumerate(message.content):
        inner = block.content if isinstance(block, ToolResultBlock) else [block]
        for k, part in enumerate(inner if isinstance(inner, list) else []):
            if not isinstance(part, _VISIBLE) or (
                isinstance(part, ImageBlock) and not _elsewhere(part, provider)
            ):
                continue
            reason = unreadable(part, caps, provider)
            if reason is not None:
                at = f"{where}.content[{j}]" + (f".content[{k}]" if part is not block else "")
                article = "an" if part.type in ("audio", "image") else "a"
                problems.append(f"{at}: {article} {part.type} it cannot read: {reason}")
    return problems


def _elsewhere(image: ImageBlock, provider: str) -> bool:
    """Whether ``image`` is given by a file id another provider's Files API issued (the turn
    being sent checks other images in ``capability_check``)."""
    source = image.source
    return isinstance(source, FileIdSource) and not same_files(source.provider, provider)


def _unseen(block: ImageBlock, caps: AdapterCapabilities) -> str | None:
    if not caps.supports_images:
        return "the model takes no image input"
    accepted = caps.accepted_image_media_types
    source = block.source
    if accepted and isinstance(source, Base64ImageSource) and source.media_type not in accepted:
        return f"the model takes no {source.media_type} images"
    return None


def _readable(
    message: Message, where: str, caps: AdapterCapabilities, provider: str, drop: Drop
) -> Message:
    kept: list[ContentBlock] = []
    for block in message.content:
        if isinstance(block, _VISIBLE):
            reason = unreadable(block, caps, provider)
            if reason is not None:
                drop(block.type, reason, where)
                continue
        elif isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
            parts = [p for p in block.content if _kept(p, caps, provider, drop, where)]
            if len(parts) != len(block.content):
                block = block.model_copy(update={"content": parts})
        kept.append(block)
    if len(kept) == len(message.content) and all(
        a is b for a, b in zip(kept, message.content, strict=True)
    ):
        return message
    return message.model_copy(update={"content": kept})


def _kept(part: object, caps: AdapterCapabilities, provider: str, drop: Drop, where: str) -> bool:
    if not isinstance(part, _VISIBLE):
        return True
    reason = unreadable(part, caps, provider)
    if reason is None:
        return True
    drop(part.type, f"{reason} (it was in a tool result)", where)
    return False


def _accepted(block: MediaBlock, caps: AdapterCapabilities) -> set[str]:
    if isinstance(block, DocumentBlock):
        types = caps.accepted_document_media_types
    elif isinstance(block, AudioBlock):
        types = caps.accepted_audio_media_types
    else:
        types = caps.accepted_video_media_types
    return {_canonical(t) for t in types}


def _canonical(media_type: str) -> str:
    lowered = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(lowered, lowered)
