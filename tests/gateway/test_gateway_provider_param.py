"""A provider's own refusal of a field, passed through to an OpenAI-API client, keeps the
``param`` the provider named (docs/gateway.md, "Errors"), so the openai SDK's ``e.param`` says
which field it was; a translated request's refusal names none (the provider's field is not
the client's)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
REFUSED = {
    "error": {
        "message": "Invalid value for 'reasoning_effort': 'extreme'.",
        "type": "invalid_request_error",
        "param": "reasoning_effort",
        "code": "invalid_value",
    }
}


def refusing(request: httpx.Request) -> httpx.Response:
    return httpx.Response(400, json=REFUSED, headers={"x-request-id": "req_up"})


def config(emulator: Emulator) -> Any:
    original = emulator.client
    emulator.client = lambda: httpx.AsyncClient(  # type: ignore[method-assign]
        transport=httpx.MockTransport(refusing)
    )
    try:
        return gateway_config(emulator)
    finally:
        emulator.client = original  # type: ignore[method-assign]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("model", ["gpt", "gpt5"])
async def test_a_passed_through_refusal_keeps_the_providers_param(model: str, stream: bool) -> None:
    app = create_app(config(Emulator(model=[], models="any")))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport) as http:
        sdk = openai.AsyncOpenAI(
            api_key=GATEWAY_KEY, base_url="http://gw/v1", http_client=http, max_retries=0
        )
        with pytest.raises(openai.BadRequestError) as refused:
            if model == "gpt":
                said = [{"role": "user", "content": "Hi"}]
                await sdk.chat.completions.create(model=model, messages=said, stream=stream)  # type: ignore[call-overload]
            else:
                await sdk.responses.create(model=model, input="Hi", stream=stream)
    assert refused.value.param == "reasoning_effort"


async def test_a_translated_refusal_names_no_field_of_another_api() -> None:
    app = create_app(config(Emulator(model=[], models="any")))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
        said = {"model": "gpt5", "messages": [{"role": "user", "content": "Hi"}]}
        reply = await http.post(
            "/v1/chat/completions", json=said, headers={"authorization": f"Bearer {GATEWAY_KEY}"}
        )
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] is None
