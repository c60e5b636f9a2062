"""Documents that ask to be cited, on a provider that cites no documents (docs/contract.md
§12): the request goes as it is (the wire has no field for it) and each message holding such a
document is reported with the lossy-projection WARN, so ``citations=True`` never does nothing
unsaid."""

from __future__ import annotations

from collections.abc import Iterator

from metis.model.capabilities import AdapterCapabilities
from metis.model.content import ContentBlock, ToolResultBlock
from metis.model.media import DocumentBlock
from metis.model.media_fit import Drop
from metis.model.request import CanonicalRequest

CITATIONS_FLAG = "document.citations"
"""The dropped-content block type of a document's ``citations=True`` a provider cannot take."""
NO_DOCUMENT_CITATIONS = (
    "the provider cites no documents (Anthropic and Bedrock do); the document is sent "
    "without citations"
)


def report_document_citations(
    request: CanonicalRequest, caps: AdapterCapabilities, drop: Drop
) -> None:
    """Each message of ``request`` with a document asking for citations (in its content or a
    tool result's) reported to ``drop`` where ``caps`` cites no documents."""
    if caps.cites_documents:
        return
    for i, message in enumerate(request.messages):
        if any(block.citations for block in _documents(message.content)):
            drop(CITATIONS_FLAG, NO_DOCUMENT_CITATIONS, f"messages[{i}]")


def _documents(blocks: list[ContentBlock]) -> Iterator[DocumentBlock]:
    for block in blocks:
        if isinstance(block, DocumentBlock):
            yield block
        elif isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
            yield from (part for part in block.content if isinstance(part, DocumentBlock))
