"""count_tokens: the provider's own counting endpoint where it has one, else the estimate."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter.count_tokens import count_tokens
from metis.errors import AuthError, ErrorClass
from metis.model import CanonicalRequest, DocumentBlock, Message
from metis.testing.emulator import Emulator

from ..routing_helpers import MODELS, WEATHER, emulated

pytestmark = [
    pytest.mark.usefixtures("no_backoff"),  # retries are not waited for
    pytest.mark.backend_independent,  # wire formats checked against the emulator
]


COUNTED = {
    "anthropic": "/v1/messages/count_tokens",
    "openai_responses": "/v1/responses/input_tokens",
    "gemini": "/v1beta/models/gemini-2.5-flash:countTokens",
}


def request(provider: str) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS[provider],
        system_prompt="Be brief.",
        messages=[Message.user("What's the weather in Paris? " * 20)],
        tools=[WEATHER],
        max_output_tokens=256,
        temperature=0.3,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(COUNTED))
async def test_providers_with_an_endpoint_count_there(provider: str, emulator: Emulator) -> None:
    adapter = emulated(emulator)[provider]
    with anyio.fail_after(20):
        counted = await adapter.count_tokens(request(provider))
        served = await adapter.complete(request(provider))
    assert counted.source == "provider"
    assert counted.detail == emulator.url + COUNTED[provider]
    (sent,) = [r for r in emulator.requests if r.path == COUNTED[provider]]
    assert sent.status == 200
    body = sent.json()
    assert "max_tokens" not in body and "stream" not in body and "temperature" not in body
    # the provider's own count: close to the usage of the same request served (Anthropic's
    # documentation calls its count an estimate that may differ a little from the usage)
    assert counted.input_tokens == pytest.approx(served.usage.total_input_tokens, rel=0.1)


@pytest.mark.anyio
async def test_a_provider_without_an_endpoint_gets_the_estimate(emulator: Emulator) -> None:
    adapter = emulated(emulator)["openai"]
    counted = await adapter.count_tokens(request("openai"))
    assert counted.source == "estimate" and "no token-counting endpoint" in counted.detail
    assert counted.input_tokens == adapter.estimate_input_tokens(
        request("openai").messages, [WEATHER], "Be brief.", model=MODELS["openai"]
    )
    assert emulator.stats.requests == 0


@pytest.mark.anyio
async def test_an_estimate_says_how_many_files_it_could_not_count(emulator: Emulator) -> None:
    """A PDF's tokens only the provider can count: an estimate of a request holding one says
    it left it out, rather than a small number that looks like the request's size."""
    adapter = emulated(emulator)["openai"]
    pdf = DocumentBlock.from_bytes(b"%PDF-1.4\n" * 500, "application/pdf")
    text = DocumentBlock.from_text("Float was big.")
    with_files = request("openai").model_copy(
        update={"messages": [Message.user("Read these.", pdf, text, pdf)]}
    )
    counted = await adapter.count_tokens(with_files)
    assert counted.source == "estimate"
    assert counted.detail.endswith(
        "; 2 files (a PDF, audio, video) not counted: only the provider can count them"
    )
    plain = await adapter.count_tokens(request("openai"))
    assert "not counted" not in plain.detail  # no file left out: nothing said of files


@pytest.mark.anyio
async def test_a_failing_endpoint_falls_back_to_the_estimate_or_raises(
    emulator: Emulator,
) -> None:
    adapter = emulated(emulator)["anthropic"]
    emulator.push_fault("auth")
    counted = await adapter.count_tokens(request("anthropic"))
    assert counted.source == "estimate" and "failed" in counted.detail
    emulator.push_fault("auth")
    with pytest.raises(AuthError):
        await count_tokens(adapter, request("anthropic"), estimate_on_error=False)


@pytest.mark.anyio
async def test_an_answer_without_a_count_is_a_protocol_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"tokens": "many"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k", http_client=client))
    with pytest.raises(Exception) as raised:
        await count_tokens(adapter, request("anthropic"), estimate_on_error=False)
    assert getattr(raised.value, "error_class", None) is ErrorClass.OTHER
    assert "without a token count" in str(raised.value)


def test_the_emulator_refuses_output_settings_on_input_tokens(emulator_server: Emulator) -> None:
    emulator_server.reset()
    url = emulator_server.url + "/v1/responses/input_tokens"
    headers = {"authorization": "Bearer k"}
    good = {"model": "gpt-4o", "input": "Hello there", "instructions": "Be brief."}
    answer = httpx.post(url, json=good, headers=headers)
    assert answer.status_code == 200
    served = httpx.post(emulator_server.url + "/v1/responses", json=good, headers=headers)
    assert answer.json() == {
        "object": "response.input_tokens",
        "input_tokens": served.json()["usage"]["input_tokens"],
    }
    bad = httpx.post(url, content=json.dumps({**good, "stream": True}), headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "stream"


@pytest.mark.anyio
async def test_a_router_counts_with_its_first_model(emulator: Emulator) -> None:
    from metis.routing import Router

    route = Router([MODELS["gemini"], MODELS["anthropic"]], adapters=emulated(emulator))
    counted = await route.count_tokens(request("anthropic"))
    assert counted.source == "provider" and counted.detail.endswith(COUNTED["gemini"])


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["bedrock", "bedrock_anthropic"])
@pytest.mark.parametrize("auth", ["sigv4", "bearer"])
async def test_bedrock_counts_at_count_tokens_addressed_and_signed_like_any_request(
    stack: str, auth: str, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ..testing.test_bedrock_emulator import CREDENTIALS, ask, use_keys
    from ..testing.test_bedrock_emulator import adapter as bedrock_adapter

    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    if auth == "sigv4":
        use_keys(monkeypatch, "AKIDEMULATOR", CREDENTIALS["AKIDEMULATOR"])
        built = bedrock_adapter(stack, emulator)
    else:
        built = bedrock_adapter(stack, emulator, api_key="a-bedrock-api-key")
    counted = await count_tokens(built, ask(stack))
    assert counted.source == "provider" and counted.input_tokens > 0, counted.detail
    (sent,) = [r for r in emulator.requests if r.path.endswith("/count-tokens")]
    body = sent.json()
    kind = "converse" if stack == "bedrock" else "invokeModel"
    assert list(body["input"]) == [kind]
    authorization = sent.headers.get("authorization", "")
    assert authorization.startswith("AWS4-HMAC-SHA256" if auth == "sigv4" else "Bearer ")
    await built.aclose()
