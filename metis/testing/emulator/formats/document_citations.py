"""Citations of the request's documents, for a scripted reply that cites (``Reply(cite=True)``,
docs/emulator.md): each document that asks for them (``citations: {enabled: true}``) is cited
once, in request order, as Anthropic's Messages API (and InvokeModel) and Bedrock Converse
cite. A text document is cited by its first characters (``char_location``,
``documentChar``, up to 100); a PDF, which the emulator does not read, by its first page
(``page_location``, ``documentPage``) quoting nothing. Sources: docs.anthropic.com
"Citations"; botocore ``bedrock-runtime/2023-09-30/service-2.json`` (``CitationLocation``)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

QUOTED = 100
"""The most characters of a text document a citation quotes."""


def anthropic_document_citations(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Anthropic's citation objects, one per document of ``body`` asking to be cited."""
    out: list[dict[str, Any]] = []
    for index, block in _anthropic_documents(body):
        title = block.get("title")
        text = _anthropic_text(block.get("source"))
        if text is None:
            out.append({"type": "page_location", "cited_text": "", "document_index": index,
                        "document_title": title, "start_page_number": 1,
                        "end_page_number": 2})  # fmt: skip
        else:
            quoted = text[:QUOTED]
            out.append({"type": "char_location", "cited_text": quoted, "document_index": index,
                        "document_title": title, "start_char_index": 0,
                        "end_char_index": len(quoted)})  # fmt: skip
    return out


def converse_document_citations(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Converse's ``Citation`` objects, one per document of ``body`` asking to be cited."""
    out: list[dict[str, Any]] = []
    index = 0
    for message in body.get("messages") or []:
        for block in message.get("content") or []:
            document = block.get("document") if isinstance(block, dict) else None
            if not isinstance(document, dict):
                continue
            if (document.get("citations") or {}).get("enabled") is True:
                out.append(_converse_citation(index, document))
            index += 1
    return out


def _converse_citation(index: int, document: dict[str, Any]) -> dict[str, Any]:
    source = document.get("source") or {}
    text = source.get("text") if isinstance(source.get("text"), str) else None
    if text is None and document.get("format") == "txt":
        text = _decoded(source.get("bytes"))
    cited: dict[str, Any] = {"title": document.get("name")}
    if text is None:
        cited["location"] = {"documentPage": {"documentIndex": index, "start": 1, "end": 2}}
        return cited
    quoted = text[:QUOTED]
    cited["sourceContent"] = [{"text": quoted}]
    cited["location"] = {"documentChar": {"documentIndex": index, "start": 0, "end": len(quoted)}}
    return cited


def _anthropic_documents(body: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    index = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "document":
                continue
            if (block.get("citations") or {}).get("enabled") is True:
                yield index, block
            index += 1


def _anthropic_text(source: Any) -> str | None:
    """A plain-text document's text (given as text, or as base64 of ``text/plain``)."""
    if not isinstance(source, dict):
        return None
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return str(source["data"])
    if source.get("type") == "base64" and source.get("media_type") == "text/plain":
        return _decoded(source.get("data"))
    return None


def _decoded(data: Any) -> str | None:
    try:
        return base64.b64decode(str(data or "")).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return None
