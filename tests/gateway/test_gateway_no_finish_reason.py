"""A Chat Completions stream that names no finish_reason but ends with ``[DONE]`` reads the
same on both of the gateway's paths: passed through (the Chat relay) and translated (the Chat
codec's ``end_marked``), each a whole reply ended as a turn's end, told to the telemetry as
``end_turn`` and counted in no error class; without ``[DONE]`` each is cut short and counted
as one failure (docs/gateway.md, Faults)."""

from __future__ import annotations

import httpx
import pytest

from metis.gateway.app import create_app
from metis.model.response import StopKind
from metis.telemetry.events import CallCompleted, CallFailed
from metis.telemetry.sinks import ListSink
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_answers import AUTH, NO_FINISH, SAID
from tests.gateway.test_gateway_faults_upstream import gateway_config_with

pytestmark = pytest.mark.anyio
HI = [{"role": "user", "content": SAID}]
PATHS = {  # the same upstream model (openai:gpt-4o) asked in Chat's shape and in Anthropic's
    "pass-through": ("/v1/chat/completions", {"messages": HI}),
    "translated": ("/v1/messages", {"messages": HI, "max_tokens": 20}),
}


@pytest.mark.parametrize("marked", [True, False])
@pytest.mark.parametrize("path", sorted(PATHS))
async def test_both_paths_read_the_end_alike(path: str, marked: bool) -> None:
    body = NO_FINISH + (b"data: [DONE]\n\n" if marked else b"")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(answer)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    url, sent = PATHS[path]
    told = ListSink()
    app.state.gateway.models.resolve("gpt").chat_model.telemetry = told
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
        reply = await gw.post(url, json={"model": "gpt", "stream": True, **sent}, headers=AUTH)
        metrics = (await gw.get("/metrics")).text
    assert reply.status_code == 200 and reply.headers["x-metis-path"] == path
    errors = [line for line in metrics.splitlines() if line.startswith("metis_gateway_errors")]
    ends = [e for e in told.events if isinstance(e, CallCompleted | CallFailed)]
    assert len(ends) == 1, told.events
    if marked:
        assert errors == [] and "error" not in reply.text, reply.text
        assert isinstance(ends[0], CallCompleted) and ends[0].stop_reason.kind is StopKind.END_TURN
    else:
        assert len(errors) == 1 and errors[0].endswith('error_class="other"} 1'), errors
        assert isinstance(ends[0], CallFailed) and ends[0].error_class == "other", ends
