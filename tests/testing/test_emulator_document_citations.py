"""A scripted reply that cites (``Reply(cite=True)``) cites each document of the request that
asks for citations, as Anthropic's Messages API and Bedrock Converse do: a text document by
its first characters, a PDF by its first page (docs/emulator.md)."""

from __future__ import annotations

import pytest

import metis
from metis.testing.emulator import Emulator, Reply

pytestmark = pytest.mark.anyio

TEXT = metis.DocumentBlock.from_text("Float was $171 billion.", title="Letter", citations=True)
PDF = metis.DocumentBlock.from_bytes(
    b"%PDF-1.4\n%%EOF\n", "application/pdf", title="Annual", citations=True
)
MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "bedrock": "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0",
}


@pytest.mark.parametrize("stack", sorted(MODELS))
@pytest.mark.parametrize("streamed", [False, True])
async def test_each_document_asking_for_citations_is_cited_where_it_stands(
    stack: str, streamed: bool
) -> None:
    emulator = Emulator(model=lambda prompt: Reply(text="It was $171 billion.", cite=True))
    settings = {"region": "us-east-1"} if stack == "bedrock" else None
    async with (
        emulator.client() as client,
        metis.build_adapter(stack, api_key="k", http_client=client, settings=settings) as adapter,
    ):
        reply = await adapter.complete(
            metis.CanonicalRequest(
                model=MODELS[stack],
                messages=[metis.Message.user("What was the float?", TEXT, PDF)],
                max_output_tokens=64,
                stream=streamed,
            )
        )
    text, page = reply.citations
    assert text.kind == page.kind == "document"
    assert text.cited_text == "Float was $171 billion."
    assert text.document is not None and page.document is not None
    assert (text.document.index, text.document.title, text.document.unit) == (0, "Letter", "char")
    assert (text.document.start, text.document.end) == (0, len("Float was $171 billion."))
    assert (page.document.index, page.document.title, page.document.unit) == (1, "Annual", "page")
    assert (page.document.start, page.document.end) == (1, 2)


async def test_a_reply_that_does_not_cite_cites_nothing() -> None:
    emulator = Emulator(model=["It was $171 billion."])
    async with (
        emulator.client() as client,
        metis.build_adapter("anthropic", api_key="k", http_client=client) as adapter,
    ):
        reply = await adapter.complete(
            metis.CanonicalRequest(
                model=MODELS["anthropic"],
                messages=[metis.Message.user("What was the float?", TEXT)],
                max_output_tokens=64,
            )
        )
    assert reply.citations == []
