"""Gemini's grounding and recitation metadata as citations (docs/contract.md §12), for
:class:`~metis.wire.schema.gemini_tools.GeminiParts`.

A candidate's ``groundingMetadata`` cites, by each of its ``groundingSupports``, the
``groundingChunks`` it names for the span of the reply its ``segment`` gives. A chunk is one
source: a web page (``web``: Google Search), a place (``maps``: Google Maps), an image
(``image``: its page is ``sourceUri``) or retrieved context (``retrievedContext``: a File
Search or RAG document, its ``uri`` where it has one). A chunk of another kind has no canonical
form: its citations are reported (WARN), not silently left out. ``citationMetadata`` (the
sources a reply recites: Vertex's ``citations``, the Gemini API's ``citationSources``) makes a
URL citation of each source, named by its ``uri`` where it has one. Sources: python-genai
``types.py`` (``GroundingMetadata``, ``GroundingChunk``, ``GroundingChunkWeb``,
``GroundingChunkMaps``, ``GroundingChunkImage``, ``GroundingChunkRetrievedContext``,
``GroundingSupport``, ``Segment``, ``CitationMetadata``, ``Citation``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from metis.model.citation import Citation, TextSpan
from metis.model.content import ProviderRaw

Unreadable = Callable[[str], None]
"""Told the key(s) of a grounding chunk of no known kind."""

_SOURCES: dict[str, tuple[Literal["url", "document"], str]] = {
    "web": ("url", "uri"),
    "maps": ("url", "uri"),
    "image": ("url", "sourceUri"),
    "retrievedContext": ("document", "uri"),
}
"""A grounding chunk's kinds of source: the citation's kind, and the key of its URL."""


def citations(grounding: dict[str, Any], text: str, unreadable: Unreadable) -> list[Citation]:
    """``groundingMetadata`` as citations of ``text``: one per supported segment and chunk,
    else (no supports) one per chunk."""
    chunks = [_source(chunk, unreadable) for chunk in _list(grounding, "groundingChunks")]
    out: list[Citation] = []
    supports = _list(grounding, "groundingSupports")
    for support in supports:
        segment = support.get("segment") if isinstance(support, dict) else None
        span, quoted = _span(segment if isinstance(segment, dict) else {}, text)
        for index in _list(support, "groundingChunkIndices"):
            source = chunks[index] if isinstance(index, int) and 0 <= index < len(chunks) else None
            if source is not None:
                out.append(_cited(*source, support, span, quoted))
    if not supports:
        out = [_cited(*source, {}, None, None) for source in chunks if source is not None]
    return out


def recited(source: dict[str, Any]) -> Citation:
    """A ``citationMetadata`` source as a URL citation (no URL where it names none)."""
    uri, title = source.get("uri"), source.get("title")
    return Citation(
        kind="url",
        url=uri if isinstance(uri, str) else None,
        title=title if isinstance(title, str) else None,
        provider_raw=ProviderRaw(provider="gemini", data={"citation": source}),
    )


def _source(chunk: Any, unreadable: Unreadable) -> tuple[str, dict[str, Any]] | None:
    """A grounding chunk's kind of source and the source; None (reported) for another kind."""
    if isinstance(chunk, dict):
        for key, source in chunk.items():
            if key in _SOURCES and isinstance(source, dict):
                return key, source
    unreadable(", ".join(map(str, chunk)) if isinstance(chunk, dict) and chunk else repr(chunk))
    return None


def _cited(
    kind: str,
    source: dict[str, Any],
    support: dict[str, Any],
    span: TextSpan | None,
    quoted: str | None,
) -> Citation:
    citation_kind, url_key = _SOURCES[kind]
    uri, title = source.get(url_key), source.get("title")
    data = {"support": support, "chunk": source}
    return Citation(
        kind=citation_kind,
        url=uri if isinstance(uri, str) else None,
        title=title if isinstance(title, str) else None,
        cited_text=quoted,
        span=span,
        provider_raw=ProviderRaw(
            provider="gemini", data=data if kind == "web" else {**data, "source": kind}
        ),
    )


def _span(segment: dict[str, Any], text: str) -> tuple[TextSpan | None, str | None]:
    """The segment's span of ``text``: where its text is, else its offsets (UTF-8 bytes)."""
    quoted = segment.get("text") if isinstance(segment.get("text"), str) else None
    if quoted and (at := text.find(quoted)) >= 0:
        return TextSpan(start=at, end=at + len(quoted)), quoted
    start, end = segment.get("startIndex", 0), segment.get("endIndex")
    if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
        data = text.encode()
        first = len(data[:start].decode(errors="ignore"))
        return TextSpan(start=first, end=len(data[:end].decode(errors="ignore"))), quoted
    return None, quoted


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []
