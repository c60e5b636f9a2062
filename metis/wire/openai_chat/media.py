"""Images, documents and audio as Chat Completions content parts.

From the SDK's ``ChatCompletionContentPartParam``: ``image_url`` (a URL or a data URL),
``file`` (``{filename, file_data}`` with a data URL, or ``{file_id}``; PDFs only, per the
file-inputs guide, and never by URL) and ``input_audio`` (``{data, format}``, wav or mp3, for
the audio models). A document's context, which the part has no field for, is a text part
before it; its title names the file.
"""

from __future__ import annotations

from typing import Any

from metis.model.content import Base64ImageSource, ImageBlock
from metis.model.media import AudioBlock, DocumentBlock, FileIdSource, MediaBlock
from metis.wire.codec import EncodeContext
from metis.wire.media import cannot_carry, data_url, filename, inline, preamble

AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def media_parts(
    block: ImageBlock | MediaBlock, call: EncodeContext, message_id: str, current: bool
) -> list[dict[str, Any]]:
    """The block's content parts (none, with the refusal or WARN, when it has no form here)."""
    if isinstance(block, ImageBlock):
        url = image_url(block)
        if url is None:
            cannot_carry(call, block, NO_IMAGE_FILE_ID, message_id, current)
            return []
        return [{"type": "image_url", "image_url": {"url": url}}]
    part = _document(block) if isinstance(block, DocumentBlock) else _audio(block)
    if isinstance(part, str):
        cannot_carry(call, block, part, message_id, current)
        return []
    said = preamble(block, title=False) if isinstance(block, DocumentBlock) else None
    return [{"type": "text", "text": said}, part] if said else [part]


NO_IMAGE_FILE_ID = (
    "Chat Completions takes images inline or by URL, not by file id (give the image inline, "
    "or use the openai_responses stack, which takes it by file id)"
)


def image_url(block: ImageBlock) -> str | None:
    """The image as a URL (inline: a data URL); None for a file id, which Chat has no form for."""
    source = block.source
    if isinstance(source, Base64ImageSource):
        return f"data:{source.media_type};base64,{source.data}"
    if isinstance(source, FileIdSource):
        return None
    return source.url


def _document(block: DocumentBlock) -> dict[str, Any] | str:
    if isinstance(block.source, FileIdSource):
        return {"type": "file", "file": {"file_id": block.source.file_id}}
    data = inline(block)
    if data is None:
        return "Chat Completions takes files inline or by file id, not by URL"
    return {"type": "file", "file": {"filename": filename(block), "file_data": data_url(data)}}


def _audio(block: MediaBlock) -> dict[str, Any] | str:
    if not isinstance(block, AudioBlock):
        return "Chat Completions takes no video"
    data = inline(block)
    wire_format = AUDIO_FORMATS.get(block.media_type() or "")
    if data is None or wire_format is None:
        return "Chat Completions takes audio inline, as wav or mp3"
    return {"type": "input_audio", "input_audio": {"data": data.data, "format": wire_format}}
