"""The size, count and shape limits providers document for files, checked on the encoded body
before it is sent (``pre_send_check``, metis/wire/rules.py).

- Anthropic (build-with-claude/pdf-support, vision): a request is at most 32 MB (a 413); a
  base64 document is a PDF, a text document ``text/plain``; citations are enabled on every
  document of a request or on none; an image is at most 5 MB (as base64) and a request holds
  at most 100. In Anthropic's words (:func:`anthropic_media`, which the emulator's table runs
  too), but for the count of images (metis's).
- OpenAI Chat Completions (guides/file-inputs, the SDK's ``File`` and ``InputAudio``): a
  ``file`` part holds ``file_data`` (a PDF data URL, with a ``filename``) or ``file_id``;
  ``input_audio`` is ``wav`` or ``mp3``.
- OpenAI Responses (``ResponseInputFileParam``): an ``input_file`` gives exactly one of
  ``file_data``, ``file_id`` and ``file_url``.
- Gemini (gemini-api/docs/file-input-methods): inline data totals at most 100 MB (as base64),
  an inline PDF at most 50 MB; inline data has its MIME type and data; files in a function
  response only for Gemini 3 and later (:func:`gemini_media`, which the emulator runs too; the
  PDF's words are metis's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from metis.wire.refusal import Refusal

MB = 1024 * 1024
ANTHROPIC_REQUEST_BYTES = 32 * MB
"""The largest Anthropic request body (past it, a 413)."""
ANTHROPIC_IMAGE_BYTES = 5 * MB
"""The largest Anthropic image, as its base64 text."""
ANTHROPIC_IMAGES = 100
"""The most images an Anthropic request holds (metis's limit)."""
GEMINI_INLINE_BYTES = 100 * MB
"""The most inline data a Gemini request holds, as base64 text."""
GEMINI_PDF_BYTES = 50 * MB
"""The largest inline PDF a Gemini request holds, decoded."""


Place = tuple[str, int, int, int]
"""Where a part is: the key of its message's content, the message's index, its index there,
and its index inside a tool result (-1 for a part of the message itself); :func:`named`."""


def parts(messages: Any, key: str = "content") -> Iterator[tuple[Place, dict[str, Any]]]:
    """Every content part of ``messages`` (and of the tool results in them), with where it is
    (named only for a part with a problem: most have none)."""
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get(key) if isinstance(message, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            if not isinstance(part, dict):
                continue
            yield (key, i, j, -1), part
            inner = part.get("content")
            if part.get("type") == "tool_result" and isinstance(inner, list):
                for k, nested in enumerate(inner):
                    if isinstance(nested, dict):
                        yield (key, i, j, k), nested


def named(place: Place) -> str:
    key, i, j, k = place
    return f"messages.{i}.{key}.{j}" + (f".content.{k}" if k >= 0 else "")


def anthropic_media(
    body: dict[str, Any], file_known: Callable[[str], bool] | None = None
) -> Iterator[Refusal]:
    """The images and documents of a Messages API body (and of its tool results), as Anthropic
    refuses them; ``file_known`` (the emulator's) tells the file ids that exist."""
    inline = images = 0
    citing: set[bool] = set()
    for place, part in parts(body.get("messages")):
        kind = part.get("type")
        if kind != "image" and kind != "document" and "source" not in part:
            continue
        source = _obj(part.get("source"))
        data = source.get("data")
        size = len(data) if isinstance(data, str) else 0
        inline += size
        if kind == "image":
            images += 1
            file_id = source.get("file_id") if source.get("type") == "file" else None
            if file_id is not None and file_known is not None and not file_known(str(file_id)):
                yield Refusal(f"File not found: {file_id}")
            if size > ANTHROPIC_IMAGE_BYTES:  # the limit is on the base64 text
                yield Refusal(
                    f"{named(place)}.image.source.base64: image exceeds 5 MB maximum: "
                    f"{size} bytes > {ANTHROPIC_IMAGE_BYTES} bytes"
                )
        elif kind == "document":
            citing.add(_obj(part.get("citations")).get("enabled") is True)
            yield from _anthropic_document(named(place), source, file_known)
    if inline > ANTHROPIC_REQUEST_BYTES:
        yield Refusal("Request exceeds the maximum allowed number of bytes.", status=413)
    if images > ANTHROPIC_IMAGES:
        yield Refusal(f"messages: {images} images; a request holds at most 100")
    if len(citing) > 1:
        yield Refusal("Citations must be enabled on all documents or on none of them.")


_ANTHROPIC_MEDIA = {"base64": "application/pdf", "text": "text/plain"}
_ANTHROPIC_SOURCE_FIELD = {"base64": "data", "text": "data", "url": "url"}


def _anthropic_document(
    where: str, source: dict[str, Any], file_known: Callable[[str], bool] | None
) -> Iterator[Refusal]:
    kind = source.get("type")
    if kind == "file" and file_known is not None and not file_known(str(source.get("file_id"))):
        yield Refusal(f"File not found: {source.get('file_id')}")
    if kind in ("file", "content"):
        return
    if str(kind) not in _ANTHROPIC_SOURCE_FIELD:
        yield Refusal(
            f"{where}.document.source: Input tag '{kind}' found using 'type' does not match any "
            "of the expected tags: 'base64', 'text', 'content', 'url', 'file'"
        )
        return
    at = f"{where}.document.source.{kind}"
    media = _ANTHROPIC_MEDIA.get(str(kind))
    if media is not None and source.get("media_type") != media:
        yield Refusal(f"{at}.media_type: Input should be '{media}'")
    field = _ANTHROPIC_SOURCE_FIELD[str(kind)]
    if not isinstance(source.get(field), str):
        yield Refusal(f"{at}.{field}: Field required")


def openai_chat_media_problems(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for place, part in parts(body.get("messages")):
        kind = part.get("type")
        if kind != "file" and kind != "input_audio":
            continue
        where = named(place)
        if kind == "file":
            file = _obj(part.get("file"))
            given = [key for key in ("file_data", "file_id") if key in file]
            if len(given) != 1:
                problems.append(f"{where}.file: give one of file_data and file_id")
            data = file.get("file_data")
            if isinstance(data, str) and not data.startswith("data:application/pdf;base64,"):
                problems.append(f"{where}.file.file_data: a PDF data URL (PDF files only)")
            if "file_data" in file and not file.get("filename"):
                problems.append(f"{where}.file.filename: required with file_data")
        elif kind == "input_audio":
            audio = _obj(part.get("input_audio"))
            if audio.get("format") not in ("wav", "mp3"):
                problems.append(f"{where}.input_audio.format: wav or mp3")
    return problems


def openai_responses_media_problems(items: list[Any]) -> list[str]:
    problems: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        content = item.get("content") if item.get("type", "message") == "message" else None
        output = item.get("output") if item.get("type") == "function_call_output" else None
        for key, value in (("content", content), ("output", output)):
            for j, part in enumerate(value if isinstance(value, list) else []):
                if isinstance(part, dict) and part.get("type") == "input_file":
                    given = [k for k in ("file_data", "file_id", "file_url") if part.get(k)]
                    if len(given) != 1:
                        problems.append(
                            f"input[{i}].{key}[{j}]: give one of file_data, file_id and file_url"
                        )
    return problems


def gemini_media(
    body: dict[str, Any],
    model: str | None = None,
    file_known: Callable[[Any], bool] | None = None,
) -> Iterator[Refusal]:
    """The inline data, files and multimodal function responses of a Gemini body, as Gemini
    refuses them; ``model`` (when known) is the one asked, ``file_known`` (the emulator's)
    tells the file URIs that exist."""
    inline = 0
    for where, part in _gemini_parts(body.get("contents")):
        blob = part.get("inlineData")
        if isinstance(blob, dict):
            data = blob.get("data")
            size = len(data) if isinstance(data, str) else 0
            inline += size
            if not blob.get("mimeType") or not isinstance(data, str):
                yield Refusal(
                    f"* GenerateContentRequest.{where}.inline_data: mime_type and data required"
                )
            if blob.get("mimeType") == "application/pdf" and size * 3 // 4 > GEMINI_PDF_BYTES:
                yield Refusal(f"{where}.inline_data: an inline PDF is at most 50 MB")
        uri = _obj(part.get("fileData")).get("fileUri")
        if "fileData" in part and file_known is not None and not file_known(uri):
            yield Refusal(
                f"* GenerateContentRequest.{where}.file_data.file_uri: Invalid file uri: {uri}"
            )
        nested = _obj(part.get("functionResponse")).get("parts")
        if nested and model is not None and not _GEMINI_MULTIMODAL.match(model):
            yield Refusal(
                f"* GenerateContentRequest.{where}.function_response.parts: multimodal function "
                f"responses are not supported by {model}"
            )
    if inline > GEMINI_INLINE_BYTES:
        yield Refusal(f"Request payload size exceeds the limit: {GEMINI_INLINE_BYTES} bytes.")


_GEMINI_MULTIMODAL = re.compile(r"^gemini-(?:[3-9]|[1-9][0-9])")
"""The models that take files in a function response (Gemini 3 and later)."""


def _gemini_parts(contents: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, content in enumerate(contents if isinstance(contents, list) else []):
        found = _obj(content).get("parts")
        for j, part in enumerate(found if isinstance(found, list) else []):
            if not isinstance(part, dict):
                continue
            yield f"contents[{i}].parts[{j}]", part
            nested = _obj(part.get("functionResponse")).get("parts")
            for k, inner in enumerate(nested if isinstance(nested, list) else []):
                if isinstance(inner, dict):
                    yield f"contents[{i}].parts[{j}].function_response.parts[{k}]", inner


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
