"""OpenAI's background mode (``background: true``) at the gateway. A passed-through request
goes without it, said in ``x-metis-dropped``: the gateway answers when the response is done,
as the translated path does (a queued response's result, fetched later by id from the
gateway, would never come). An upstream that answers with a response still pending anyway is
the library's classified error on both paths, never an empty finished reply, and nothing is
kept of it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_upstream import gateway_config_with
from tests.gateway_fixture import GATEWAY_KEY

pytestmark = pytest.mark.anyio
HEADERS = {"authorization": f"Bearer {GATEWAY_KEY}"}


def response(status: str, output: list[Any]) -> dict[str, Any]:
    return {
        "id": "resp_bg1",
        "object": "response",
        "status": status,
        "background": status != "completed",
        "error": None,
        "model": "gpt-5",
        "output": output,
        "usage": None if status != "completed" else {"input_tokens": 5, "output_tokens": 2},
    }


DONE = [
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
    }
]


def gateway(answer: dict[str, Any], sent: list[dict[str, Any]]) -> httpx.AsyncClient:
    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=answer)

    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(upstream)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://gw")


async def test_a_passed_through_request_goes_without_background_and_says_so() -> None:
    sent: list[dict[str, Any]] = []
    async with gateway(response("completed", DONE), sent) as gw:
        asked = {"model": "gpt5", "input": "Hi", "background": True}
        reply = await gw.post("/v1/responses", json=asked, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-metis-path"] == "pass-through"
    assert "background" not in sent[0]
    assert "background" in reply.headers["x-metis-dropped"]
    assert reply.json()["status"] == "completed"


async def test_background_false_is_passed_on_unnamed() -> None:
    sent: list[dict[str, Any]] = []
    async with gateway(response("completed", DONE), sent) as gw:
        asked = {"model": "gpt5", "input": "Hi", "background": False}
        reply = await gw.post("/v1/responses", json=asked, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    assert sent[0]["background"] is False
    assert "background" not in reply.headers.get("x-metis-dropped", "")


@pytest.mark.parametrize("status", ["queued", "in_progress"])
async def test_a_pending_answer_passed_through_is_an_error_and_not_kept(status: str) -> None:
    sent: list[dict[str, Any]] = []
    async with gateway(response(status, []), sent) as gw:
        reply = await gw.post(
            "/v1/responses", json={"model": "gpt5", "input": "Hi"}, headers=HEADERS
        )
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and "resp_bg1" in error["message"]
        kept = await gw.get("/v1/responses/resp_bg1", headers=HEADERS)
        assert kept.status_code == 404, kept.text  # never served as if it were the answer


@pytest.mark.parametrize("status", ["queued", "in_progress"])
async def test_a_pending_answer_to_a_translated_request_is_an_error(status: str) -> None:
    """An Anthropic client of the Responses model: the library's reading, in its API."""
    sent: list[dict[str, Any]] = []
    async with gateway(response(status, []), sent) as gw:
        asked = {"model": "gpt5", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}
        reply = await gw.post("/v1/messages", json=asked, headers=HEADERS)
    assert reply.headers.get("x-metis-path") != "pass-through"
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert "resp_bg1" in reply.json()["error"]["message"]
