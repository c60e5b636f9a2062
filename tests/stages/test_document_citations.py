"""A document that asks to be cited (docs/contract.md §12): sent as Anthropic's and Bedrock's
``citations: {enabled: true}``; on a provider that cites no documents the ask is reported with
the dropped-content WARN, never silently ignored."""

from __future__ import annotations

import pytest

import metis
from metis.model import CanonicalRequest, Message, ToolResultBlock
from metis.model.capabilities import AdapterCapabilities
from metis.model.citation_fit import CITATIONS_FLAG, report_document_citations
from metis.testing.emulator import Emulator

from .. import stack_table as platforms
from ..helpers import recording_call

pytestmark = pytest.mark.anyio

CITED = metis.DocumentBlock.from_bytes(
    b"%PDF-1.4\n%%EOF\n", "application/pdf", title="Letter", citations=True
)


def _request(stack: str) -> CanonicalRequest:
    return platforms.request(stack, tools=[]).model_copy(
        update={"messages": [Message.user("What was the float?", CITED)]}
    )


@pytest.mark.parametrize(
    ("stack", "cites"),
    [("anthropic", True), ("bedrock", True), ("openai", False), ("gemini", False)],
)
async def test_citations_are_asked_for_where_the_provider_cites_documents_else_reported(
    stack: str, cites: bool
) -> None:
    emulator = Emulator()
    client = emulator.client()
    settings = {"region": "us-east-1"} if stack == "bedrock" else None
    async with metis.build_adapter(
        stack, api_key="k", http_client=client, settings=settings
    ) as adapter:
        reply = await adapter.complete(_request(stack))
    await client.aclose()
    dropped = [w for w in reply.warnings if w.block_type == CITATIONS_FLAG]
    assert bool(dropped) is not cites
    assert ("citations" in str(emulator.bodies(platforms.target(stack))[0])) is cites


def test_a_document_in_a_tool_result_is_reported_once_per_message() -> None:
    call = recording_call("openai", "openai:gpt-4o")
    result = ToolResultBlock(tool_use_id="tu_1", content=[CITED])
    request = CanonicalRequest(
        model="openai:gpt-4o",
        messages=[Message.user("Read it.", CITED, CITED), Message(role="tool", content=[result])],
        max_output_tokens=64,
    )
    report_document_citations(request, AdapterCapabilities(), call.warn_dropped)
    assert call.dropped_types == [CITATIONS_FLAG, CITATIONS_FLAG]
    report_document_citations(request, AdapterCapabilities(cites_documents=True), call.warn_dropped)
    assert len(call.dropped_types) == 2  # a provider that cites documents: nothing reported
