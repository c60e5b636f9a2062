"""A token count below zero in an embedding or a compaction answer: it cannot be true, so it
says nothing of the answer, which is kept with its usage estimated and a warning naming what
was sent, as a chat reply's is (docs/reliability.md, "Numbers"). It was a ProtocolError there,
and the vectors or the compacted history that arrived whole were lost."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import build_embedder
from metis.adapter.compaction import compact_conversation
from metis.model import Message
from metis.testing.emulator import Emulator

from ..stack_table import adapter
from .test_faulty_answers import Reshaping, _counts_negative, request_for

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]

EMBEDDERS = [  # each wire that says how many tokens it embedded
    ("openai", "text-embedding-3-small", {}),
    ("cohere", "embed-v4.0", {}),
    ("vertex", "gemini-embedding-001", {"project": "p", "location": "us-central1"}),
    ("bedrock", "amazon.titan-embed-text-v2:0", {"region": "us-east-1"}),
    ("ollama", "nomic-embed-text", {}),
]


def negative(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
    content = json.dumps(_counts_negative(json.loads(body))).encode()
    return httpx.Response(status, headers=headers, content=content)


def _warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cannot be true" in r.getMessage()]


@pytest.mark.parametrize(("stack", "model", "settings"), EMBEDDERS)
async def test_an_embedding_answer_with_a_negative_count_keeps_its_vectors(
    stack: str, model: str, settings: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    emulator = Emulator()
    texts = ["the first text", "a second one"]
    async with httpx.AsyncClient(transport=Reshaping(emulator, negative)) as client:
        embedder = build_embedder(
            stack, api_key="k", http_client=client, settings=settings, max_retries=0
        )
        result = await embedder.embed(texts, model=f"{stack}:{model}")
    assert len(result.vectors) == 2
    assert result.usage.estimated and result.usage.input_tokens > 0
    warned = _warned(caplog)
    assert warned and all("-5" in said for said in warned), warned


async def test_a_compaction_answer_with_a_negative_count_keeps_its_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    emulator = Emulator()
    request = request_for("openai_responses").model_copy(
        update={"messages": [Message.user("Describe the harbour."), Message.assistant("Busy.")]}
    )
    async with httpx.AsyncClient(transport=Reshaping(emulator, negative)) as client:
        built = adapter("openai_responses", emulator, http_client=client, max_retries=0)
        try:
            compacted = await compact_conversation(built, request)
        finally:
            await built.aclose()
    assert compacted.messages
    assert compacted.usage.estimated and compacted.usage.input_tokens > 0
    (warned,) = _warned(caplog)
    assert "-5" in warned
