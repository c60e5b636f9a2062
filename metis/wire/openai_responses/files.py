"""Documents as Responses ``input_file`` parts (the SDK's ``ResponseInputFileParam``).

An ``input_file`` gives one of ``file_data`` (a data URL, with a ``filename``), ``file_url``
and ``file_id``; it may stand in a user message or in a ``function_call_output``. A document's
context, which the part has no field for, is an ``input_text`` part before it; its title names
the file. Audio and video have no form in Responses input.
"""

from __future__ import annotations

from typing import Any

from metis.model.media import DocumentBlock, FileIdSource, MediaBlock, URLSource
from metis.wire.media import data_url, filename, inline, preamble


def file_parts(block: MediaBlock, *, file_urls: bool = True) -> list[dict[str, Any]] | str:
    """The block's input parts, or why it has none here. ``file_urls``: the server fetches
    files by URL (Azure's Responses API does not)."""
    if not isinstance(block, DocumentBlock):
        return f"the Responses API takes no {block.type} input"
    part: dict[str, Any] = {"type": "input_file"}
    source = block.source
    if isinstance(source, FileIdSource):
        part["file_id"] = source.file_id
    elif isinstance(source, URLSource):
        if not file_urls:
            return "this Responses API takes no files by URL"
        part["file_url"] = source.url
    else:
        data = inline(block)
        assert data is not None  # base64 or text
        part.update(filename=filename(block), file_data=data_url(data))
    said = preamble(block, title=False)
    return [{"type": "input_text", "text": said}, part] if said else [part]
