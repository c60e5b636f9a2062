"""Annotations with no canonical form are never dropped unsaid (docs/gateway.md, "Projection"):
OpenRouter's ``file`` annotation (its parse of a PDF, which a client gives back so OpenRouter
skips parsing it again) and any other type a Chat-compatible service sends, in a client's
history or in a model's reply, are named in ``x-metis-dropped`` with their type, as the SDKs
read the header."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_clients import over
from tests.gateway_fixture import GATEWAY_KEY

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
PARSED = {"type": "file", "file": {"hash": "h1", "name": "a.pdf", "content": [{"type": "text"}]}}


def test_a_chat_clients_file_annotation_is_named_where_it_is_left_out(url: str) -> None:
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
    turns: Any = [
        {"role": "user", "content": "What does a.pdf say?"},
        {"role": "assistant", "content": "It says hi.", "annotations": [PARSED]},
        {"role": "user", "content": "And then?"},
    ]
    raw = oai.chat.completions.with_raw_response.create(model="flash", messages=turns)
    assert raw.headers["x-metis-path"] == "translated"
    said = raw.headers["x-metis-dropped"]
    assert "messages[1].annotations[0] (file annotation: no canonical form)" in said


def _openrouter_reply(request: httpx.Request) -> httpx.Response:
    """A Chat-compatible service's whole reply whose text carries a ``file`` annotation."""
    message = {"role": "assistant", "content": "It says hi.", "annotations": [PARSED]}
    body = {
        "id": "gen-1",
        "object": "chat.completion",
        "model": "openai/gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
    }
    return httpx.Response(200, json=body, headers={"content-type": "application/json"})


@pytest.mark.anyio
async def test_a_replys_file_annotation_is_named_to_a_client_of_another_api() -> None:
    app = over(Emulator(), _openrouter_reply)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        asked = {"model": "gpt", "max_tokens": 50, "messages": [{"role": "user", "content": "?"}]}
        reply = await client.post("/v1/messages", json=asked, headers={"x-api-key": GATEWAY_KEY})
    assert reply.json()["content"][0]["text"] == "It says hi."
    said = reply.headers["x-metis-dropped"]
    assert "annotation" in said and "file" in said, said
    assert json.dumps(PARSED["file"]["name"]) not in said  # its type named, not its content
