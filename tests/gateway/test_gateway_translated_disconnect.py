"""A client that goes away before a translated (or routed) stream's first event: the upstream
call is cancelled at once, as a passed-through one's is (test_gateway_faults_clients.py)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_clients import BODY, Upstream, over
from tests.gateway_fixture import scope

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("model", ["gpt", "fallback"])  # translated; a route
async def test_a_client_that_goes_away_before_a_translated_streams_first_event(
    model: str,
) -> None:
    upstream = Upstream(silent=True)
    app = over(Emulator(), upstream)
    requested: list[bool] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not requested:
            requested.append(True)
            data = json.dumps({**BODY, "model": model, "stream": True}).encode()
            return {"type": "http.request", "body": data, "more_body": False}
        await upstream.asked.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(30):  # a bound on a hang: it ends at once when right
        await app(scope(), receive, send)
    assert upstream.closed
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] in ([], [499])
