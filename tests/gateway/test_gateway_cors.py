"""A browser's calls (the anthropic and openai SDKs run in a page, as both APIs allow): its
CORS preflight and the answers it may read, when ``gateway.cors_origins`` names its origin
(docs/gateway.md, "Limits and safety"). Before, there was no such setting: a preflight was a
405 and no answer said ``Access-Control-Allow-Origin``, so a page could not call the
gateway at all."""

from __future__ import annotations

import json

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
PAGE = "https://app.example"
BODY = {"model": "sonnet", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]}
PREFLIGHT = {
    "origin": PAGE,
    "access-control-request-method": "POST",
    "access-control-request-headers": "x-api-key, content-type, anthropic-version",
}


def client(app: object) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=60)


async def test_a_page_of_an_origin_named_may_call_and_read_the_answers() -> None:
    app = create_app(gateway_config(Emulator(), {"cors_origins": [PAGE]}))
    async with client(app) as gw:
        for path in ("/v1/messages", "/v1/chat/completions", "/v1/models"):
            reply = await gw.options(path, headers=PREFLIGHT)
            assert reply.status_code == 200, (path, reply.text)
            assert reply.headers["access-control-allow-origin"] == PAGE
            assert "POST" in reply.headers["access-control-allow-methods"]
            assert "x-api-key" in reply.headers["access-control-allow-headers"].lower()
        for streamed in (False, True):
            headers = {"x-api-key": GATEWAY_KEY, "origin": PAGE}
            reply = await gw.post(
                "/v1/messages", json={**BODY, "stream": streamed}, headers=headers
            )
            assert reply.status_code == 200, reply.text
            assert reply.headers["access-control-allow-origin"] == PAGE
            exposed = reply.headers["access-control-expose-headers"].lower()
            assert "request-id" in exposed and "retry-after" in exposed
        refused = await gw.post("/v1/messages", json=BODY, headers={"origin": PAGE})
        assert refused.status_code == 401  # a key is still needed; the page may read why
        assert refused.headers["access-control-allow-origin"] == PAGE
        other = await gw.options("/v1/messages", headers={**PREFLIGHT, "origin": "https://x.y"})
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
        plain = await gw.post("/v1/messages", json=BODY, headers={"x-api-key": GATEWAY_KEY})
        assert "access-control-allow-origin" not in plain.headers  # no Origin: as before


async def test_without_cors_origins_a_preflight_is_refused_as_before() -> None:
    app = create_app(gateway_config(Emulator()))
    async with client(app) as gw:
        reply = await gw.options("/v1/messages", headers=PREFLIGHT)
        assert reply.status_code == 405 and "access-control-allow-origin" not in reply.headers
        said = await gw.post(
            "/v1/messages", json=BODY, headers={"x-api-key": GATEWAY_KEY, "origin": PAGE}
        )
        assert said.status_code == 200 and "access-control-allow-origin" not in said.headers
        assert json.loads(said.text)["type"] == "message"
