"""Tokens a reply spent on another model (``TokenUsage.other_models``: Anthropic's advisor
passes) in ``metis_gateway_tokens_total``, under that model's own label (the id the cost is
priced at: the call's provider and the pass's model), on the pass-through and the translated
path; the reply's model keeps its own counts. The cost metric had them; the tokens did not."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_upstream import gateway_config_with
from tests.gateway_fixture import GATEWAY_KEY

pytestmark = pytest.mark.anyio
HEADERS = {"authorization": f"Bearer {GATEWAY_KEY}", "anthropic-version": "2023-06-01"}
SONNET, OPUS = "anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-1"


def answer(request: httpx.Request) -> httpx.Response:
    executor = {"type": "message", "input_tokens": 100, "output_tokens": 10}
    advisor = {"type": "advisor_message", "model": "claude-opus-4-1"}
    advisor.update(input_tokens=700, output_tokens=30, cache_read_input_tokens=40)
    body: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "4"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 10, "iterations": [executor, advisor]},
    }
    return httpx.Response(200, json=body)


def counted(text: str, family: str, model: str, direction: str = "") -> float:
    labels = f'model="{model}"' + (f',direction="{direction}"' if direction else "")
    found = re.search(rf"^metis_gateway_{family}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", {"max_tokens": 50, "messages": [{"role": "user", "content": "2+2"}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "2+2"}]}),
    ],
    ids=["pass-through", "translated"],
)
async def test_another_models_tokens_are_counted_under_its_own_label(
    path: str, body: dict[str, Any]
) -> None:
    app = create_app(gateway_config_with(Emulator(), httpx.MockTransport(answer)))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
        reply = await gw.post(path, json={"model": "sonnet", **body}, headers=HEADERS)
        assert reply.status_code == 200, reply.text
        text = (await gw.get("/metrics")).text
    assert counted(text, "tokens_total", SONNET, "input") == 100
    assert counted(text, "tokens_total", SONNET, "output") == 10
    assert counted(text, "tokens_total", OPUS, "input") == 740  # its cache reads included
    assert counted(text, "tokens_total", OPUS, "output") == 30
    assert counted(text, "cost_usd_total", SONNET) > 0
