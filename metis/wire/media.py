"""What every encoder does with file blocks (docs/contract.md §9): their forms on the wire, the
one rule for a form a wire cannot carry, and the projection of media out of a tool result.

A block this wire cannot carry in the form given (a PDF by URL on Chat Completions, audio by
file id) is a CapabilityError when it is in the turn being sent, and is dropped whole with the
lossy-projection WARN from an older turn. The capability check has already refused or dropped
what the model cannot read at all; this is what the wire's own shape cannot hold.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from typing import NoReturn

from metis.errors import CapabilityError, InvalidRequestError
from metis.model.content import ImageBlock, TextBlock, ToolResultBlock
from metis.model.media import Base64Source, DocumentBlock, MediaBlock, TextSource
from metis.wire.codec import EncodeContext

_EXTENSIONS = {"text/plain": ".txt", "text/markdown": ".md", "audio/mpeg": ".mp3"}


def data_url(source: Base64Source) -> str:
    """``data:<media type>;base64,<data>``, the form OpenAI's APIs take inline files in."""
    return f"data:{source.media_type};base64,{source.data}"


def inline(block: MediaBlock) -> Base64Source | None:
    """The block's bytes as base64 (a text document's UTF-8), or None when it is not inline."""
    if isinstance(block.source, Base64Source):
        return block.source
    if isinstance(block.source, TextSource):
        if not block.source.text:  # no file is empty: the wire's base64 needs a byte
            raise InvalidRequestError("a text document with no text cannot be sent as a file")
        try:
            return block.source.as_base64()
        except UnicodeEncodeError:
            raise InvalidRequestError("a text document holds a lone UTF-16 surrogate") from None
    return None


def filename(block: DocumentBlock) -> str:
    """A file name for the document: its title, with the extension its media type has."""
    media_type = block.media_type()
    extension = (
        _EXTENSIONS.get(media_type) or mimetypes.guess_extension(media_type) if media_type else None
    )
    name = block.title or "document"
    if extension and not name.lower().endswith(extension):
        name += extension
    return name


def preamble(block: DocumentBlock, *, title: bool) -> str | None:
    """What a wire with no field for them shows the model before a document: its context (and
    its title where ``title``), as a text part."""
    said = [part for part in (block.title if title else None, block.context) if part]
    return "\n\n".join(said) or None


def cannot_carry(
    call: EncodeContext, block: MediaBlock | ImageBlock, reason: str, message_id: str, current: bool
) -> None:
    """The block is not sent: a CapabilityError in the turn being sent (``current``), else
    dropped with the lossy-projection WARN."""
    if current:
        refuse_block(call, block.type, reason, message_id)
    call.warn_dropped(block.type, reason, message_id=message_id)


def refuse_block(call: EncodeContext, block_type: str, reason: str, message_id: str) -> NoReturn:
    """The CapabilityError for a block of the turn being sent that this wire cannot carry."""
    raise CapabilityError(
        f"{call.model} cannot take the {block_type} in {message_id}: {reason}",
        provider=call.provider,
        request_id=call.request_id,
    )


Attachment = ImageBlock | MediaBlock


@dataclass(slots=True)
class Projected:
    """A tool result split for a wire whose tool results hold text only: the result with a note
    for each attachment, and the attachments, to follow in a user message of their own."""

    result: ToolResultBlock
    attachments: list[Attachment] = field(default_factory=list)


NEXT_MESSAGE = "in the next message"
AFTER_THE_RESULTS = "after the tool results"
AFTER_THIS_RESULT = "after this tool result"


def project_attachments(
    result: ToolResultBlock, keep: tuple[type, ...] = (), where: str = NEXT_MESSAGE
) -> Projected:
    """``result`` with every image and file not of a ``keep`` type moved out: in its place the
    text says ``[<kind> <n> follows <where>]`` (a document by its title), ``where`` saying
    where the wire puts it: :data:`NEXT_MESSAGE`, or in the same message
    :data:`AFTER_THE_RESULTS` (all of them) or :data:`AFTER_THIS_RESULT`."""
    kept = (TextBlock, *keep)
    if isinstance(result.content, str) or all(isinstance(p, kept) for p in result.content):
        return Projected(result)
    content: list[object] = []
    attachments: list[Attachment] = []
    for part in result.content:
        if isinstance(part, kept):
            content.append(part)
            continue
        assert not isinstance(part, TextBlock)  # text is always kept
        attachments.append(part)
        label = f"{part.type} {len(attachments)}"
        if isinstance(part, DocumentBlock) and part.title:
            label = f"document {part.title!r}"
        content.append(TextBlock(text=f"[{label} follows {where}]"))
    return Projected(result.model_copy(update={"content": content}), attachments)
