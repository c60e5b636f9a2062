"""Documents on the Messages API: the ``document`` block and its four sources.

From the SDK's ``DocumentBlockParam``: ``source`` is base64 (PDF only), a URL (a PDF), plain
text (``text/plain``) or a Files API ``file`` id; ``title``, ``context`` and ``citations:
{enabled}`` sit next to it. Audio and video have no form here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metis.model.media import (
    Base64Source,
    DocumentBlock,
    FileIdSource,
    MediaBlock,
    TextSource,
    URLSource,
)
from metis.wire.codec import EncodeContext
from metis.wire.media import cannot_carry

PDF = "application/pdf"
FILES_BETA = "files-api-2025-04-14"
"""What a ``source: {type: file}`` needs (the Files API page); harmless once it is GA."""


@dataclass(frozen=True, slots=True)
class At:
    """Where a block is being encoded: the call, the message, whether it is in the turn being
    sent (a block this wire cannot carry is then refused, not dropped), and whether the
    message is the assistant's (documents go in user messages only)."""

    call: EncodeContext
    where: str
    current: bool
    assistant: bool = False


def document(block: MediaBlock, at: At) -> dict[str, Any] | None:
    """The ``document`` block, or None (with the refusal or WARN) when it has no form here."""
    if not isinstance(block, DocumentBlock):
        cannot_carry(at.call, block, "Anthropic takes no audio or video", at.where, at.current)
        return None
    source = document_source(block) if not at.assistant else "only in user messages"
    if isinstance(source, str):
        cannot_carry(at.call, block, source, at.where, at.current)
        return None
    return document_block(block, source)


def document_block(block: DocumentBlock, source: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's ``document`` block of ``block`` read from ``source``: its title, context
    and citations where it has them."""
    out: dict[str, Any] = {"type": "document", "source": source}
    if block.title:
        out["title"] = block.title
    if block.context:
        out["context"] = block.context
    if block.citations:
        out["citations"] = {"enabled": True}
    return out


def document_source(block: DocumentBlock) -> dict[str, Any] | str:
    """The wire source, or why there is none."""
    source = block.source
    media_type = block.media_type()
    if isinstance(source, FileIdSource):
        return {"type": "file", "file_id": source.file_id}
    if isinstance(source, URLSource):
        if media_type not in (None, PDF):
            return f"Anthropic fetches only PDFs by URL, not {media_type}"
        return {"type": "url", "url": source.url}
    if media_type == PDF and isinstance(source, Base64Source):
        return {"type": "base64", "media_type": PDF, "data": source.data}
    if media_type == "text/plain":
        text = source.text if isinstance(source, TextSource) else source.decoded_text()
        if text is None:
            return "its text/plain data is not UTF-8 text"
        return {"type": "text", "media_type": "text/plain", "data": text}
    return f"Anthropic takes PDF and plain-text documents, not {media_type}"


def names_files(body: dict[str, Any]) -> bool:
    """Whether a block of the body's messages (or of a tool result in them) gives its source
    as a Files API id."""
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            inner = block.get("content") if isinstance(block, dict) else None
            nested = inner if isinstance(inner, list) else ()
            for one in (block, *nested):
                source = one.get("source") if isinstance(one, dict) else None
                if isinstance(source, dict) and source.get("type") == "file":
                    return True
    return False
