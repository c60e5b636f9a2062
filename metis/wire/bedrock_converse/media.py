"""Documents, audio and video on Bedrock Converse, and the limits its reference states.

From botocore's ``bedrock-runtime`` model: ``document`` is ``{format, name, source, context?,
citations?}`` with ``format`` one of pdf csv doc docx xls xlsx html txt md and a ``name`` of
alphanumerics, single spaces, hyphens, parentheses and brackets (1 to 200 characters, which the
model reads); its ``source`` is ``bytes`` (base64 in JSON), ``text`` or an ``s3Location``.
``audio`` and ``video`` are ``{format, source: bytes | s3Location}``. An S3 object is given as
a file id with ``provider="bedrock"`` (``s3://bucket/key``). The ``Message`` reference: at most
20 images (3.75 MB each) and 5 documents (4.5 MB each) per message, a document only next to a
text block, images and documents only in user messages; a video as bytes under 25 MB.
"""

from __future__ import annotations

import re
from typing import Any

from metis.model.media import (
    AudioBlock,
    Base64Source,
    DocumentBlock,
    FileIdSource,
    MediaBlock,
    TextSource,
)
from metis.wire.media import filename

DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
AUDIO_FORMATS = {
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/opus": "opus",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/aac": "aac",
    "audio/flac": "flac",
    "audio/mp4": "mp4",
    "audio/ogg": "ogg",
    "audio/x-matroska": "mka",
    "audio/x-aac": "x-aac",
    "audio/m4a": "m4a",
    "audio/webm": "webm",
    "audio/pcm": "pcm",
}
VIDEO_FORMATS = {
    "video/x-matroska": "mkv",
    "video/quicktime": "mov",
    "video/mp4": "mp4",
    "video/webm": "webm",
    "video/x-flv": "flv",
    "video/mpeg": "mpeg",
    "video/x-ms-wmv": "wmv",
    "video/3gpp": "three_gp",
}
MB = 1024 * 1024
MAX_DOCUMENTS, DOCUMENT_BYTES = 5, 4.5 * MB
MAX_IMAGES, IMAGE_BYTES = 20, 3.75 * MB
VIDEO_BASE64 = 25 * MB
_NAME = re.compile(r"^(?:[A-Za-z0-9()\[\]-]| (?! ))+$")
_UNNAMEABLE = re.compile(r"[^A-Za-z0-9()\[\]\s-]+")


def media(block: MediaBlock, names: set[str]) -> dict[str, Any] | str:
    """The ``document``, ``audio`` or ``video`` content block, or why there is none.
    ``names`` holds the document names already used in the request."""
    formats = (
        DOCUMENT_FORMATS
        if isinstance(block, DocumentBlock)
        else AUDIO_FORMATS
        if isinstance(block, AudioBlock)
        else VIDEO_FORMATS
    )
    media_type = block.media_type()
    wire_format = formats.get(media_type or "")
    source = _source(block)
    if isinstance(source, str):
        return source
    if wire_format is None and not isinstance(block.source, TextSource):
        return f"Converse takes no {block.type} of type {media_type or 'unknown'}"
    if not isinstance(block, DocumentBlock):
        return {block.type: {"format": wire_format, "source": source}}
    out: dict[str, Any] = {"format": wire_format or "txt", "name": _name(block, names)}
    out["source"] = source
    if block.context:
        out["context"] = block.context
    if block.citations:
        out["citations"] = {"enabled": True}
    return {"document": out}


def _source(block: MediaBlock) -> dict[str, Any] | str:
    source = block.source
    if isinstance(source, Base64Source):
        return {"bytes": source.data}
    if isinstance(source, TextSource):
        return {"text": source.text}
    if isinstance(source, FileIdSource) and source.file_id.startswith("s3://"):
        return {"s3Location": {"uri": source.file_id}}
    return "Converse takes files as bytes or S3 locations, not by URL"


def _name(block: DocumentBlock, names: set[str]) -> str:
    """A neutral name Converse accepts, unique in the request: the title (or file name)
    without its extension, other characters as spaces."""
    stem = filename(block).rsplit(".", 1)[0] if block.title else "document"
    name = " ".join(_UNNAMEABLE.sub(" ", stem).split())[:190] or "document"
    unique, n = name, 1
    while unique in names:
        n += 1
        unique = f"{name} ({n})"
    names.add(unique)
    return unique


def message_problems(i: int, role: Any, blocks: list[Any]) -> list[str]:
    """The file limits of one Converse message."""
    problems: list[str] = []
    documents = [b["document"] for b in blocks if isinstance(b.get("document"), dict)]
    images = [b["image"] for b in blocks if isinstance(b.get("image"), dict)]
    if (documents or images) and role != "user":
        problems.append(f"messages.{i}: images and documents go in user messages only")
    if documents and not any("text" in b for b in blocks):
        problems.append(f"messages.{i}: a message with a document needs a text block too")
    if len(documents) > MAX_DOCUMENTS:
        problems.append(f"messages.{i}: {len(documents)} documents; at most 5 per message")
    if len(images) > MAX_IMAGES:
        problems.append(f"messages.{i}: {len(images)} images; at most 20 per message")
    for j, block in enumerate(blocks):
        problems += _block_problems(f"messages.{i}.content.{j}", block)
    return problems


def _block_problems(where: str, block: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for kind, limit in (("document", DOCUMENT_BYTES), ("image", IMAGE_BYTES)):
        value = block.get(kind)
        data = value.get("source", {}).get("bytes") if isinstance(value, dict) else None
        if isinstance(data, str) and len(data) * 3 // 4 > limit:
            problems.append(f"{where}.{kind}: at most {limit / MB:g} MB")
    document = block.get("document")
    name = document.get("name") if isinstance(document, dict) else None
    if document is not None and not (isinstance(name, str) and _NAME.match(name)):
        problems.append(
            f"{where}.document.name: {name!r}: letters, digits, single spaces, hyphens, "
            "parentheses and brackets"
        )
    if isinstance(name, str) and len(name) > 200:
        problems.append(f"{where}.document.name: at most 200 characters")
    video = block.get("video")
    data = video.get("source", {}).get("bytes") if isinstance(video, dict) else None
    if isinstance(data, str) and len(data) >= VIDEO_BASE64:
        problems.append(f"{where}.video: a video as bytes is under 25 MB (as base64)")
    return problems
