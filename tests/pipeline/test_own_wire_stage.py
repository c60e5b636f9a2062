"""A history message's wire form is kept across calls (metis/wire/encoded_messages.py), but an
application's own stage after ``encode`` gets a body made for its call alone: what it changes
in place stays in that call."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.model import CanonicalRequest, Message
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import Transform
from metis.wire.anthropic import encode
from metis.wire.encoded_messages import made_fresh
from tests.helpers import make_call

REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


class MarkFirstText(Transform[WireRequest, WireRequest]):
    """Changes the body in place (what docs/stages.md asks stages not to do)."""

    name = "mark_first_text"

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        request.body["messages"][0]["content"][0]["text"] += " [marked]"
        return request


def test_a_body_made_fresh_shares_nothing_with_later_calls() -> None:
    first = Message.user("one")
    with made_fresh():
        body = encode(
            CanonicalRequest(model="anthropic:x", messages=[first], max_output_tokens=8),
            make_call(),
        )
    body["messages"][0]["content"][0]["text"] = "changed in place"
    again = encode(
        CanonicalRequest(model="anthropic:x", messages=[first], max_output_tokens=8), make_call()
    )
    assert again["messages"][0]["content"][0]["text"] == "one"


@pytest.mark.anyio
async def test_an_own_stage_after_encode_changes_only_its_own_calls_body() -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=REPLY)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    adapter = build_adapter("anthropic", api_key="k", http_client=client)
    adapter.pipeline.insert_after("encode", MarkFirstText())
    history = [Message.user("hi"), Message.assistant("hello"), Message.user("again")]
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5", messages=history, max_output_tokens=8
    )
    for _ in range(3):
        await adapter.complete(request)
    assert [body["messages"][0]["content"][0]["text"] for body in sent] == ["hi [marked]"] * 3
    await adapter.aclose()
