"""Files on a schema-driven wire: the parts of a document, audio or video block, and the
images and files of a tool result (in the result where the wire takes them, else after it).

A file goes inline with ``file_template`` (a text document as base64 of its UTF-8) or, by URL or
the provider's file id, with ``file_uri_template``; a document's title and context, which such
parts have no field for, are a text part before it. A tool result's inline media go at
``tool_result.media_path`` for the models ``media_models`` matches (Gemini 3's multimodal
function responses); the rest follow the results as parts of the same turn, a note in the
result naming each (docs/contract.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metis.model.content import Base64ImageSource, ImageBlock, TextBlock, ToolResultBlock
from metis.model.media import DocumentBlock, FileIdSource, MediaBlock, URLSource
from metis.wire.media import NEXT_MESSAGE, Attachment, inline, preamble, project_attachments
from metis.wire.schema.compiled import Compiled
from metis.wire.schema.paths import OMIT


def file_parts(block: MediaBlock, s: Compiled, provider: str) -> list[Any] | str:
    """The block's parts, or why it has none on this wire."""
    data = inline(block)
    source = block.source
    values: dict[str, str | None]
    if data is not None:
        template, values = s.file, {"media_type": data.media_type, "data": data.data}
    else:
        assert isinstance(source, URLSource | FileIdSource)
        url = source.url if isinstance(source, URLSource) else source.file_id
        template, values = s.file_uri, {"media_type": block.media_type(), "url": url}
    if template is None:
        how = "inline" if data is not None else "by URL or file id"
        return f"{provider} has no wire form for a {block.type} given {how}"
    part = template.render(values)
    said = preamble(block, title=True) if isinstance(block, DocumentBlock) else None
    if not said:
        return [part]
    return [s.text.render({"text": said}) if s.text is not None else said, part]


@dataclass(slots=True)
class ResultMedia:
    """A tool result split for the wire: the result (text only), the parts that go in it at
    ``media_path``, and the media that follow it."""

    result: ToolResultBlock
    nested: list[Any] = field(default_factory=list)
    following: list[Attachment] = field(default_factory=list)


def result_media(
    block: ToolResultBlock, s: Compiled, wire_model: str, where: str = NEXT_MESSAGE
) -> ResultMedia:
    """``block`` split for the wire; the media that follow it are said to follow ``where``."""
    if isinstance(block.content, str) or all(isinstance(p, TextBlock) for p in block.content):
        return ResultMedia(block)
    nests = s.media_path is not None and (
        s.media_models is None or s.media_models.search(wire_model) is not None
    )
    kept: list[Any] = []
    nested: list[Any] = []
    for part in block.content:
        rendered = _nested(part, s) if nests else OMIT
        if rendered is OMIT:
            kept.append(part)
            continue
        said = preamble(part, title=True) if isinstance(part, DocumentBlock) else None
        if said:
            kept.append(TextBlock(text=said))
        nested.append(rendered)
    projected = project_attachments(block.model_copy(update={"content": kept}), where=where)
    return ResultMedia(projected.result, nested, projected.attachments)


def _nested(part: Any, s: Compiled) -> Any:
    """The inline part of an image or file for inside a result, or OMIT."""
    if isinstance(part, ImageBlock) and isinstance(part.source, Base64ImageSource):
        values = {"media_type": part.source.media_type, "data": part.source.data}
        return s.image.render(values) if s.image is not None else OMIT
    if isinstance(part, TextBlock | ImageBlock):
        return OMIT
    data = inline(part)
    if data is None or s.file is None:
        return OMIT
    return s.file.render({"media_type": data.media_type, "data": data.data})
