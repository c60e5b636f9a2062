"""Citations: where a piece of a reply's text comes from (docs/contract.md §12).

A citation sits on the ``TextBlock`` whose text it supports. It names its source (a web page by
URL and title, or a document of the request by index and title) and, where the provider says
so, the quoted ``cited_text``, the ``span`` of the block's text that makes the claim (character
offsets into ``TextBlock.text``), and the ``location`` in a document (pages, characters or
content blocks). ``provider_raw`` keeps the provider's own object: Anthropic needs a web
citation's ``encrypted_index`` back verbatim, so a citation goes back as such only to the
provider and model that made it; elsewhere the text stays and its citations are left out.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from metis.model.base import Canonical
from metis.model.block import ProviderRaw


class TextSpan(Canonical):
    """Characters ``start`` (inclusive) to ``end`` (exclusive) of the block's text."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> TextSpan:
        if self.end < self.start:
            raise ValueError(f"a span ends ({self.end}) before it starts ({self.start})")
        return self


class DocumentLocation(Canonical):
    """Where in a document of the request the cited text is: its ``index`` among the request's
    documents (or search results), its title or file id, and a range of ``unit``: ``char``
    (0-based, end exclusive), ``page`` (1-based, end exclusive) or ``block`` (content blocks,
    0-based, end exclusive)."""

    index: int | None = Field(default=None, ge=0)
    title: str | None = None
    file_id: str | None = None
    unit: Literal["char", "page", "block"] | None = None
    start: int | None = None
    end: int | None = None


class Citation(Canonical):
    """One source a text block cites: a web page (``url``, ``title``) or a document
    (``document``), with the quoted ``cited_text`` and the ``span`` of the block's text where
    the provider gives them."""

    kind: Literal["url", "document", "search_result", "file"]
    url: str | None = None
    title: str | None = None
    cited_text: str | None = None
    span: TextSpan | None = None
    document: DocumentLocation | None = None
    provider_raw: ProviderRaw | None = None
