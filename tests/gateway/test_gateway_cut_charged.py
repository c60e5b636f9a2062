"""A translated stream cut before its usage came (the client gone, the deadline) is never free:
its key is charged an estimate (the request's input as the library estimates it, the output
streamed so far), counted in the metrics as tokens, cost and estimated tokens
(docs/gateway.md, "Client disconnect")."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config, scope

pytestmark = pytest.mark.anyio
KEY = "team-key"
SAID = [{"role": "user", "content": "Tell me a long story about the sea " * 20}]
ASKED = {
    "/v1/messages": {"max_tokens": 300, "messages": SAID},
    "/v1/chat/completions": {"messages": SAID},
    "/v1/responses": {"input": SAID},
}


async def _cut_after_first_bytes(app: Any, path: str, model: str = "flash") -> list[bytes]:
    """``path`` asked for a stream of ``model`` (by default one answered by Gemini), whose
    stream stalls after its first events; the client goes away once the first bytes came."""
    body = json.dumps({"model": model, **ASKED[path], "stream": True}).encode()
    given, first = [False], anyio.Event()
    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if not given[0]:
            given[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await first.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            sent.append(message["body"])
            first.set()

    asked = scope(path)
    asked["headers"] = [(b"x-api-key", KEY.encode()), (b"content-type", b"application/json")]
    with anyio.fail_after(30):  # a bound on a hang: the stall is cut by the disconnect
        await app(asked, receive, send)
    return sent


@pytest.mark.parametrize("path", list(ASKED))
async def test_a_translated_stream_cut_by_the_client_is_charged_an_estimate(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    emulator = Emulator()
    keys = [{"name": "team", "sha256": digest(KEY), "budget_usd": 5}]
    app = create_app(gateway_config(emulator, {"keys": keys}))
    emulator.push_fault("stall=30;after=2", provider="gemini")
    with caplog.at_level(logging.WARNING, "metis.gateway"):
        sent = await _cut_after_first_bytes(app, path)
    assert sent and b"said" in b"".join(sent)  # what streamed before the cut
    gateway = app.state.gateway
    assert await gateway.keys.spent("team") > Decimal(0)
    metrics = gateway.metrics
    model = "gemini:gemini-2.5-flash"
    assert metrics.estimated[(model, "input")] == metrics.tokens[(model, "input")] > 40
    assert metrics.estimated[(model, "output")] == metrics.tokens[(model, "output")] > 0
    assert metrics.cost[model] > 0
    said = metrics.render()
    assert f'metis_gateway_estimated_tokens_total{{model="{model}",direction="input"}}' in said
    (logged,) = [r for r in caplog.records if getattr(r, "event", "") == "metis.usage_estimated"]
    assert "cut before its usage came" in logged.getMessage()


@pytest.mark.parametrize(
    ("path", "model", "served_by", "estimated"),
    [
        ("/v1/chat/completions", "gpt", "openai:gpt-4o", True),  # usage comes last
        ("/v1/responses", "gpt5", "openai_responses:gpt-5", True),  # with response.completed
        ("/v1/messages", "sonnet", "anthropic:claude-sonnet-4-5", False),  # message_start's
    ],
)
async def test_a_passed_through_stream_cut_by_the_client_is_charged_what_it_can_be(
    path: str, model: str, served_by: str, estimated: bool
) -> None:
    """The input its provider reported before the cut (Anthropic's ``message_start``), or
    where it reported none, the input estimated from the body sent."""
    emulator = Emulator()
    keys = [{"name": "team", "sha256": digest(KEY), "budget_usd": 5}]
    app = create_app(gateway_config(emulator, {"keys": keys}))
    emulator.push_fault("stall=30;after=2", provider=served_by.split(":")[0])
    assert await _cut_after_first_bytes(app, path, model)
    gateway = app.state.gateway
    assert await gateway.keys.spent("team") > Decimal(0)
    metrics = gateway.metrics
    assert metrics.tokens[(served_by, "input")] > 40
    assert (metrics.estimated[(served_by, "input")] > 0) is estimated


async def test_a_whole_reply_cut_by_the_client_is_charged_its_input_estimated() -> None:
    """The client goes away while the model (Gemini, translated) is still answering: its key
    is charged the input the library estimates, the output it never saw not counted."""
    emulator, arrived = Emulator(), anyio.Event()

    async def thinking(request: httpx.Request) -> httpx.Response:
        arrived.set()  # the model has the request, and answers nothing yet
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    transport = httpx.MockTransport(thinking)
    emulator.client = lambda: httpx.AsyncClient(transport=transport)  # type: ignore[method-assign]
    keys = [{"name": "team", "sha256": digest(KEY), "budget_usd": 5}]
    app = create_app(gateway_config(emulator, {"keys": keys}))
    body = json.dumps({"model": "flash", **ASKED["/v1/messages"]}).encode()
    given = [False]

    async def receive() -> dict[str, Any]:
        if not given[0]:
            given[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await arrived.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    asked = scope("/v1/messages")
    asked["headers"] = [(b"x-api-key", KEY.encode()), (b"content-type", b"application/json")]
    with anyio.fail_after(30):  # a bound on a hang: the wait is cut by the disconnect
        await app(asked, receive, send)
    gateway, model = app.state.gateway, "gemini:gemini-2.5-flash"
    assert await gateway.keys.spent("team") > Decimal(0)
    assert gateway.metrics.estimated[(model, "input")] > 40
    assert gateway.metrics.estimated[(model, "output")] == 0
