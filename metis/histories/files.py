"""Documents and audio in stored histories, both ways (docs/contract.md §9).

OpenAI Chat: a ``file`` part (``{filename, file_data}``, a data URL, or ``{file_id}``, an
OpenAI file) and ``input_audio`` (``{data, format: wav | mp3}``). Anthropic: the ``document``
block with a base64, URL, text or ``file`` source (an Anthropic file), ``title``, ``context``
and ``citations``. What a format cannot hold (video, another provider's file id, a file by URL
in Chat) is left out with the lossy-projection WARN.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from typing import Any

from metis.errors import InvalidRequestError
from metis.histories.reading import built, dropped, mapping, text
from metis.model.media import (
    AudioBlock,
    Base64Source,
    DocumentBlock,
    FileIdSource,
    MediaBlock,
    TextSource,
    URLSource,
)
from metis.model.media_fit import same_files
from metis.wire.anthropic.documents import document_block, document_source
from metis.wire.media import data_url, filename, inline
from metis.wire.openai_chat.media import AUDIO_FORMATS

_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def split_data_url(url: str, where: str) -> tuple[str, str]:
    """(media type, base64 data) of a ``data:<type>;base64,<data>`` URL."""
    header, _, data = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    if encoding != "base64" or not data or not media_type:
        raise InvalidRequestError(f"{where}: expected a base64 data URL")
    return media_type, data


def _required(item: Mapping[str, Any], key: str, where: str) -> str:
    value = text(item, key, where, None)
    if not value:
        raise InvalidRequestError(f"{where}.{key}: expected a non-empty string")
    return value


# OpenAI Chat --------------------------------------------------------------------------------


def from_chat_file(part: Mapping[str, Any], where: str) -> DocumentBlock:
    file = mapping(part.get("file"), f"{where}.file")
    name = file.get("filename") if isinstance(file.get("filename"), str) else None
    guessed = mimetypes.guess_type(name)[0] if name else None
    if "file_id" in file:
        file_id = _required(file, "file_id", f"{where}.file")
        source: Any = built(
            FileIdSource, f"{where}.file", file_id=file_id, provider="openai", media_type=guessed
        )
    else:
        data = _required(file, "file_data", f"{where}.file")
        if data.startswith("data:"):
            media_type, encoded = split_data_url(data, f"{where}.file.file_data")
            source = built(Base64Source, f"{where}.file", media_type=media_type, data=encoded)
        elif data.startswith(("https://", "http://")):  # OpenRouter's form
            source = built(URLSource, f"{where}.file", url=data, media_type=guessed)
        else:  # bare base64: Chat takes PDFs only
            source = built(
                Base64Source, f"{where}.file", media_type=guessed or "application/pdf", data=data
            )
    return built(DocumentBlock, where, source=source, title=name)


def from_chat_audio(part: Mapping[str, Any], where: str) -> AudioBlock:
    audio = mapping(part.get("input_audio"), f"{where}.input_audio")
    media_type = _AUDIO_TYPES.get(str(audio.get("format")))
    if media_type is None:
        raise InvalidRequestError(f"{where}.input_audio.format: expected wav or mp3")
    data = _required(audio, "data", f"{where}.input_audio")
    source = built(Base64Source, f"{where}.input_audio", media_type=media_type, data=data)
    return built(AudioBlock, where, source=source)


def to_chat_parts(block: MediaBlock, where: str) -> list[dict[str, Any]]:
    """The block's Chat parts; none, with the WARN, when Chat has no form for it."""
    source = block.source
    if isinstance(block, DocumentBlock) and isinstance(source, FileIdSource):
        if same_files(source.provider, "openai"):
            return [{"type": "file", "file": {"file_id": source.file_id}}]
        dropped("document", where, "OpenAI Chat export", f"a file id of {source.provider}")
        return []
    data = inline(block)
    if isinstance(block, DocumentBlock) and data is not None:
        parts = [{"type": "text", "text": block.context}] if block.context else []
        file = {"filename": filename(block), "file_data": data_url(data)}
        return [*parts, {"type": "file", "file": file}]
    audio_format = AUDIO_FORMATS.get(block.media_type() or "")
    if isinstance(block, AudioBlock) and data is not None and audio_format is not None:
        return [{"type": "input_audio", "input_audio": {"data": data.data, "format": audio_format}}]
    dropped(block.type, where, "OpenAI Chat export", "Chat has no form for it")
    return []


# Anthropic Messages -------------------------------------------------------------------------


def from_anthropic_document(block: Mapping[str, Any], where: str) -> DocumentBlock | None:
    source = mapping(block.get("source"), f"{where}.source")
    kind = source.get("type")
    at = f"{where}.source"
    canonical: Any
    if kind == "base64":
        media_type = _required(source, "media_type", at)
        canonical = built(
            Base64Source, at, media_type=media_type, data=_required(source, "data", at)
        )
    elif kind == "url":
        canonical = built(URLSource, at, url=_required(source, "url", at))
    elif kind == "text":
        canonical = built(TextSource, at, text=str(source.get("data", "")))
    elif kind == "file":
        canonical = built(
            FileIdSource, at, file_id=_required(source, "file_id", at), provider="anthropic"
        )
    else:  # "content": custom content blocks, which no other provider has
        dropped("document", where, "Anthropic Messages import")
        return None
    citations = block.get("citations")
    return built(
        DocumentBlock,
        where,
        source=canonical,
        title=block.get("title") if isinstance(block.get("title"), str) else None,
        context=block.get("context") if isinstance(block.get("context"), str) else None,
        citations=isinstance(citations, Mapping) and citations.get("enabled") is True,
    )


def to_anthropic_document(block: MediaBlock, where: str) -> dict[str, Any] | None:
    source = block.source
    if not isinstance(block, DocumentBlock):
        dropped(block.type, where, "Anthropic Messages export", "Anthropic takes no audio or video")
        return None
    if isinstance(source, FileIdSource) and source.provider != "anthropic":
        dropped("document", where, "Anthropic Messages export", f"a file id of {source.provider}")
        return None
    wire = document_source(block)
    if isinstance(wire, str):
        dropped("document", where, "Anthropic Messages export", wire)
        return None
    return document_block(block, wire)
