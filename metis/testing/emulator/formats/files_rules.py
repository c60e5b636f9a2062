"""What Gemini and Bedrock Converse refuse of the files in a request: documents, audio and
video, by URL, inline or by file id (a file id another provider issued, a document over the size
limit, a document type or name the API does not take). Anthropic's are the library's rule
(metis/wire/media_rules.py, run by the client's ``pre_send_check`` too); OpenAI's (Chat
Completions' and Responses') are rows of ``tables/chat.yaml`` and ``tables/responses.yaml``.

Each API's check is a rule of its table (:data:`metis.testing.emulator.rules.Check`): it raises
the first refusal, as the API words it. File ids: this emulator "issued" every well-formed id
of its own provider (Anthropic ``file_...``, Gemini ``files/...``, S3 URIs on Bedrock) and no
other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from metis.testing.emulator.rules import Refused, first
from metis.wire.media_rules import gemini_media

MB = 1024 * 1024
_GEMINI_FILE = re.compile(
    r"^(?:files/|https://generativelanguage\.googleapis\.com/v1(?:beta)?/files/)[a-z0-9-]+$"
)
_S3 = re.compile(r"^s3://[a-z0-9][.\-a-z0-9]{1,61}[a-z0-9](/.*)?$")
_DOCUMENT_NAME = re.compile(r"^(?:[A-Za-z0-9()\[\]-]| (?! ))+$")
_DOCUMENT_FORMATS = {"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"}
_AUDIO_FORMATS = {"mp3", "opus", "wav", "aac", "flac", "mp4", "ogg", "mkv", "mka", "x-aac"}
_AUDIO_FORMATS |= {"m4a", "mpeg", "mpga", "pcm", "webm"}
_VIDEO_FORMATS = {"mkv", "mov", "mp4", "webm", "flv", "mpeg", "mpg", "wmv", "three_gp"}


def _parts(messages: Any, nested: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            if not isinstance(part, dict):
                continue
            yield f"messages.{i}.content.{j}", part
            inner = part.get("content") if part.get("type") == nested else None
            for k, item in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(item, dict):
                    yield f"messages.{i}.content.{j}.content.{k}", item


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# Gemini --------------------------------------------------------------------------------------


def gemini(body: dict[str, Any], call: Any = None) -> None:
    """The library's rule (metis/wire/media_rules.py), with the model asked and the file URIs
    this emulator issued."""
    model = call.model if call is not None else ""
    first(lambda body: gemini_media(body, model, _gemini_uri))(body, call)


def _gemini_uri(uri: Any) -> bool:
    if not isinstance(uri, str):
        return False
    return bool(_GEMINI_FILE.match(uri)) or uri.startswith(("https://", "http://", "gs://"))


# Bedrock Converse ----------------------------------------------------------------------------


def converse(body: dict[str, Any], call: Any = None) -> None:
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        blocks = [b for b in _obj(message).get("content") or [] if isinstance(b, dict)]
        documents = [b for b in blocks if "document" in b]
        if (documents or any("image" in b for b in blocks)) and message.get("role") != "user":
            raise Refused(
                f"messages.{i}: images and documents can only be included in user messages."
            )
        if documents and not any("text" in b for b in blocks):
            raise Refused(
                f"messages.{i}: A conversation must include a text content block when it "
                "includes a document content block."
            )
        if len(documents) > 5:
            raise Refused(f"messages.{i}: You can include up to 5 documents in a message.")
        for j, block in enumerate(blocks):
            _converse_block(f"messages.{i}.content.{j}", block)


def _converse_block(where: str, block: dict[str, Any]) -> None:
    for kind, formats in (
        ("document", _DOCUMENT_FORMATS),
        ("audio", _AUDIO_FORMATS),
        ("video", _VIDEO_FORMATS),
    ):
        value = _obj(block.get(kind))
        if kind not in block:
            continue
        if "format" in value and value["format"] not in formats:
            raise Refused(f"{where}.{kind}.format: must be one of {', '.join(sorted(formats))}")
        source = _obj(value.get("source"))
        if len(source) != 1:
            raise Refused(f"{where}.{kind}.source: must hold exactly one member")
        uri = _obj(source.get("s3Location")).get("uri")
        if "s3Location" in source and not _S3.match(str(uri)):
            raise Refused(f"{where}.{kind}.source.s3Location.uri: {uri!r} is not an S3 URI")
        data = source.get("bytes")
        if kind == "document" and isinstance(data, str) and len(data) * 3 // 4 > 4.5 * MB:
            raise Refused(f"{where}: The document is larger than 4.5 MB.")
        if kind == "document":
            _document_name(where, value.get("name"))
            return


def _document_name(where: str, name: Any) -> None:
    if isinstance(name, str) and 0 < len(name) <= 200 and _DOCUMENT_NAME.match(name):
        return
    raise Refused(
        f"{where}.document.name: The document file name can only contain alphanumeric "
        "characters, whitespace characters, hyphens, parentheses, and square brackets. The name "
        "can't contain more than one consecutive whitespace character."
    )
