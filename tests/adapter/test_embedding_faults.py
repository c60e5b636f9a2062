"""Embedding answers whose vectors are not the size asked for or not one size: a vector of
another length than ``dimensions``, vectors of two lengths in one answer or across the
requests of one call are a ProtocolError naming the sizes, never a result whose
``dimensions`` reads its first vector only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from sniffio import current_async_library as sniffio_library

from metis.adapter.embedder import build_embedder
from metis.errors import ProtocolError

pytestmark = pytest.mark.anyio
MODEL = "text-embedding-3-small"


def answering(*sizes_per_request: list[int]) -> httpx.AsyncClient:
    """A client whose n-th request is answered with vectors of the n-th list's sizes."""
    answers = list(sizes_per_request)

    def handle(request: httpx.Request) -> httpx.Response:
        sizes = answers.pop(0)
        data = [
            {"object": "embedding", "index": i, "embedding": [0.5] * size}
            for i, size in enumerate(sizes)
        ]
        body = {"object": "list", "data": data, "model": MODEL, "usage": {"prompt_tokens": 2}}
        return httpx.Response(200, content=json.dumps(body).encode())

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def test_vectors_of_another_size_than_asked_are_a_protocol_error() -> None:
    embedder = build_embedder("openai", api_key="k", http_client=answering([16, 16]))
    with pytest.raises(ProtocolError, match=r"8 dimensions were asked.*16"):
        await embedder.embed(["a", "b"], model=MODEL, dimensions=8)


async def test_vectors_of_two_sizes_in_one_answer_are_a_protocol_error() -> None:
    embedder = build_embedder("openai", api_key="k", http_client=answering([1536, 3]))
    with pytest.raises(ProtocolError, match=r"vectors of 1536 and 3 numbers"):
        await embedder.embed(["a", "b"], model=MODEL)


async def test_requests_of_one_call_answered_in_two_sizes_are_a_protocol_error(
    tmp_path: Path,
) -> None:
    stack = tmp_path / "one.yaml"
    stack.write_text("name: one\nextends: openai\nlimits: {max_inputs: 1, concurrency: 1}\n")
    embedder = build_embedder(stack, api_key="k", http_client=answering([4], [5]))
    with pytest.raises(ProtocolError, match=r"vectors of (4 and 5|5 and 4) numbers across"):
        await embedder.embed(["a", "b"], model=MODEL)


async def test_vectors_of_the_size_asked_are_the_result() -> None:
    embedder = build_embedder("openai", api_key="k", http_client=answering([8, 8]))
    result = await embedder.embed(["a", "b"], model=MODEL, dimensions=8)
    assert result.dimensions == 8 and len(result) == 2


class _OwnExit(BaseException):
    """An application's own way out, raised where its client sends a request."""


@pytest.mark.parametrize("raised", [asyncio.CancelledError, _OwnExit])
async def test_a_request_raising_what_is_not_an_exception_is_not_a_shorter_result(
    raised: type[BaseException],
) -> None:
    """A call split into two requests, the first raising a CancelledError no one cancelled
    the call for (of a task its client awaited, cancelled elsewhere) or an application's own
    BaseException: raised as it was. Before, anyio's task group dropped the CancelledError
    as the request's own cancellation: a result of 952 vectors for 3000 inputs, and no error."""
    if raised is asyncio.CancelledError and sniffio_library() != "asyncio":
        pytest.skip("an asyncio CancelledError")

    async def handle(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)["input"]
        if len(sent) == 2048:
            raise raised()
        data = [
            {"object": "embedding", "index": i, "embedding": [0.5] * 8} for i in range(len(sent))
        ]
        body = {"object": "list", "data": data, "model": MODEL, "usage": {"prompt_tokens": 2}}
        return httpx.Response(200, content=json.dumps(body).encode())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    embedder = build_embedder("openai", api_key="k", http_client=client)
    with pytest.raises(raised):
        await embedder.embed(["a"] * 3000, model=MODEL, concurrency=2)
