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
from collections.abc import Iterator
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
from metis.wire.refusal import Refusal

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


FORMATS = {
    "document": {"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"},
    "audio": {"mp3", "opus", "wav", "aac", "flac", "mp4", "ogg", "mkv", "mka", "x-aac", "m4a"}
    | {"mpeg", "mpga", "pcm", "webm"},
    "video": {"mkv", "mov", "mp4", "webm", "flv", "mpeg", "mpg", "wmv", "three_gp"},
}
"""The ``format`` each kind of file block takes (botocore's ``bedrock-runtime`` model)."""
_S3 = re.compile(r"^s3://[a-z0-9][.\-a-z0-9]{1,61}[a-z0-9](/.*)?$")


def message_files(i: int, role: Any, blocks: list[dict[str, Any]]) -> Iterator[Refusal]:
    """The files of one Converse message, as Bedrock refuses them (the counts of images and the
    sizes of images and videos in metis's words)."""
    documents = [b for b in blocks if "document" in b]
    images = [b for b in blocks if "image" in b]
    if (documents or images) and role != "user":
        yield Refusal(f"messages.{i}: images and documents can only be included in user messages.")
    if documents and not any("text" in b for b in blocks):
        yield Refusal(
            f"messages.{i}: A conversation must include a text content block when it includes "
            "a document content block."
        )
    if len(documents) > MAX_DOCUMENTS:
        yield Refusal(f"messages.{i}: You can include up to 5 documents in a message.")
    if len(images) > MAX_IMAGES:
        yield Refusal(f"messages.{i}: {len(images)} images; at most 20 per message")
    for j, block in enumerate(blocks):
        for kind in ("document", "audio", "video", "image"):
            if kind in block:
                yield from _file(f"messages.{i}.content.{j}", kind, _obj(block[kind]))


def _file(where: str, kind: str, value: dict[str, Any]) -> Iterator[Refusal]:
    formats = FORMATS.get(kind)
    if formats is not None and "format" in value and value["format"] not in formats:
        yield Refusal(f"{where}.{kind}.format: must be one of {', '.join(sorted(formats))}")
    source = _obj(value.get("source"))
    if kind != "image" and len(source) != 1:
        yield Refusal(f"{where}.{kind}.source: must hold exactly one member")
    uri = _obj(source.get("s3Location")).get("uri")
    if "s3Location" in source and not _S3.match(str(uri)):
        yield Refusal(f"{where}.{kind}.source.s3Location.uri: {uri!r} is not an S3 URI")
    data = source.get("bytes")
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    if kind == "document" and size > DOCUMENT_BYTES:
        yield Refusal(f"{where}: The document is larger than 4.5 MB.")
    elif kind == "image" and size > IMAGE_BYTES:
        yield Refusal(f"{where}.image: at most 3.75 MB")
    elif kind == "video" and isinstance(data, str) and len(data) >= VIDEO_BASE64:
        yield Refusal(f"{where}.video: a video as bytes is under 25 MB (as base64)")
    name = value.get("name")
    if kind == "document" and not (
        isinstance(name, str) and len(name) <= 200 and _NAME.match(name)
    ):
        yield Refusal(
            f"{where}.document.name: The document file name can only contain alphanumeric "
            "characters, whitespace characters, hyphens, parentheses, and square brackets. The "
            "name can't contain more than one consecutive whitespace character."
        )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
