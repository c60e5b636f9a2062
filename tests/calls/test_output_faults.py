"""Structured output that fails, told apart: JSON that is not valid, a reply cut at its output
limit, valid JSON of the wrong shape, a refusal and a content filter are each an
OutputValidationError whose message says which, the reply on ``partial_response``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from metis.calls.request import validated
from metis.errors import OutputValidationError
from metis.model import StopKind
from metis.sessions import Session

from ..fakes import FakePeer, Reply, request


class City(BaseModel):
    name: str
    population: int


def chat(content: str | None, finish: str = "stop", **message: Any) -> Reply:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    return Reply(chunks=[json.dumps(body)], headers={"content-type": "application/json"})


CASES = {
    "invalid": (chat("{name: Paris"), StopKind.END_TURN, "Invalid JSON"),
    "cut": (
        chat('{"name": "Par', finish="length"),
        StopKind.MAX_TOKENS,
        "cut at its output limit (max_tokens)",
    ),
    "shape": (chat('{"city": "Paris"}'), StopKind.END_TURN, "population: Field required"),
    "refusal": (
        chat(None, refusal="I can't help with that."),
        StopKind.REFUSAL,
        'refused ("I can\'t help with that.")',
    ),
    "filter": (chat(None, finish="content_filter"), StopKind.CONTENT_FILTER, "content filter"),
}
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


@pytest.mark.anyio
async def test_a_tool_call_in_place_of_the_answer_says_so() -> None:
    adapter = FakePeer(chat(None, finish="tool_calls", tool_calls=[CALL])).adapter("openai")
    response = await adapter.complete(request("openai"))
    await adapter.aclose()
    with pytest.raises(OutputValidationError, match="called a tool instead of answering"):
        validated(TypeAdapter(City), response)


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(CASES))
async def test_each_failed_output_says_what_happened(case: str) -> None:
    reply, kind, words = CASES[case]
    adapter = FakePeer(reply).adapter("openai")
    session = Session("openai:gpt-4o", adapters={"openai": adapter})
    with pytest.raises(OutputValidationError) as caught:
        await session.arun("Name a big city.", output_type=City)
    await adapter.aclose()
    assert words in str(caught.value)
    told = [p for p in ("max_tokens", "refused", "content filter") if p in str(caught.value)]
    assert len(told) == (0 if kind is StopKind.END_TURN else 1)
    partial = caught.value.partial_response
    assert partial is not None and partial.stop_reason.kind is kind
