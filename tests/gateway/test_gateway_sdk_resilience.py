"""The official SDKs' own resilience against ``metis serve``, each answered by a model of
another family (emulator-backed): ``max_retries`` over a 429 (waiting the ``retry-after`` the
gateway gives, from the upstream's own) and over an overloaded model (Anthropic's 529, OpenAI's
503), and a ``timeout`` that runs out in the middle of a stream (the SDK gives up with what
arrived; the gateway cancels the upstream call)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest

from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_faults_clients import over
from tests.gateway_fixture import GATEWAY_KEY, serving

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
SAID = [{"role": "user", "content": "Hi"}]
WAIT = 2.0
"""The SDKs' timeout in the stream tests: their read timeout, the longest wait for a byte."""


def retrying(client: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """``client`` with two retries, recording the wait the SDK chose before each (from the
    answer's ``retry-after``, or its own backoff without one) and then not waiting."""
    waits: list[float] = []
    chose = client._calculate_retry_timeout

    def recorded(*args: Any, **kwargs: Any) -> float:
        waits.append(chose(*args, **kwargs))
        return 0.0

    monkeypatch.setattr(client, "_calculate_retry_timeout", recorded)
    return waits


def test_the_sdks_retry_a_429_after_the_upstreams_retry_after(
    url: str, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini says its delay in a ``RetryInfo`` detail, OpenAI in ``retry-after``: the gateway
    says either in ``retry-after`` (whole seconds, rounded up), which both SDKs wait, rather
    than their own backoff (half a second)."""
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=2)
    waits = retrying(oai, monkeypatch)
    emulator.push_fault("rate_limit=2.5", provider="gemini")
    raw = oai.chat.completions.with_raw_response.create(model="flash", messages=SAID)
    assert raw.retries_taken == 1 and waits == [3.0]
    assert raw.parse().choices[0].message.content == "You said: Hi"
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=2)
    waits = retrying(claude, monkeypatch)
    emulator.push_fault("rate_limit=2", provider="openai")
    message = claude.messages.with_raw_response.create(model="gpt", max_tokens=50, messages=SAID)
    assert message.retries_taken == 1 and waits == [2.0]
    assert message.parse().content[0].text == "You said: Hi"


def test_the_sdks_retry_an_overloaded_model(
    url: str, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenAI's 503 reaches an Anthropic client as the 529 ``overloaded_error`` it retries,
    Anthropic's 529 an OpenAI client as a 503; each says ``x-should-retry: true``."""
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=2)
    waits = retrying(claude, monkeypatch)
    served = len(emulator.requests)
    emulator.push_fault("overloaded", times=2, provider="openai_responses")
    message = claude.messages.with_raw_response.create(model="gpt5", max_tokens=50, messages=SAID)
    assert message.retries_taken == 2 and len(waits) == 2
    assert message.parse().content[0].text == "You said: Hi"
    assert len(emulator.requests) - served == 3
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=1)
    retrying(oai, monkeypatch)
    emulator.push_fault("overloaded", times=2, provider="anthropic")
    with pytest.raises(openai.InternalServerError) as overloaded:
        oai.responses.create(model="sonnet", input="Hi")
    assert overloaded.value.status_code == 503
    assert overloaded.value.response.headers["x-should-retry"] == "true"
    with pytest.raises(anthropic.InternalServerError) as refused:
        emulator.push_fault("overloaded", provider="gemini")
        claude.with_options(max_retries=0).messages.create(
            model="flash", max_tokens=50, messages=SAID
        )
    assert refused.value.status_code == 529
    assert refused.value.body["error"]["type"] == "overloaded_error"


def test_an_upstream_account_out_of_credit_is_the_clients_own_spent_quota(
    url: str, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic's 400 "credit balance is too low" and Gemini's 429 "prepayment credits are
    depleted" reach an OpenAI client as OpenAI's 429 ``insufficient_quota`` and an Anthropic
    client as a 429 ``rate_limit_error``, each with ``x-should-retry: false``, so neither SDK
    sends the request again; a route moves on to its next model at once."""
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=2)
    retrying(oai, monkeypatch)
    served = len(emulator.requests)
    emulator.push_fault("out_of_credit", times=3, provider="anthropic")
    with pytest.raises(openai.RateLimitError) as spent:
        oai.chat.completions.create(model="sonnet", messages=SAID)
    assert spent.value.code == "insufficient_quota" and spent.value.type == "insufficient_quota"
    assert spent.value.response.headers["x-should-retry"] == "false"
    assert len(emulator.requests) - served == 1
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=2)
    retrying(claude, monkeypatch)
    emulator.push_fault("out_of_credit", times=3, provider="gemini")
    with pytest.raises(anthropic.RateLimitError) as depleted:
        claude.messages.create(model="flash", max_tokens=50, messages=SAID)
    assert depleted.value.body["error"]["type"] == "rate_limit_error"
    assert "prepayment credits are depleted" in depleted.value.body["error"]["message"]
    assert depleted.value.response.headers["x-should-retry"] == "false"
    assert len(emulator.requests) - served == 2
    emulator.push_fault("out_of_credit", provider="gemini")
    routed = oai.chat.completions.with_raw_response.create(model="fallback", messages=SAID)
    assert routed.headers["x-metis-model"] == "openai:gpt-4o"
    assert [r.provider for r in emulator.requests[-2:]] == ["gemini", "openai"]


class Stalling:
    """An Anthropic model that streams the start of its answer and then nothing more, with
    the connection open; it records whether its answer was closed (the call cancelled)."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    async def _events(self) -> AsyncIterator[bytes]:
        try:
            yield (
                b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
                b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
                b'"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
                b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
                b'"content_block":{"type":"text","text":""}}\n\n'
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                b'"delta":{"type":"text_delta","text":"Once upon a time"}}\n\n'
            )
            await anyio.sleep_forever()
        finally:
            self.closed.set()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=self._events())


def chat(url: str, text: list[str]) -> None:
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0, timeout=WAIT)
    said: Any = SAID
    for chunk in oai.chat.completions.create(model="sonnet", messages=said, stream=True):
        text.append(chunk.choices[0].delta.content or "")


def responses(url: str, text: list[str]) -> None:
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0, timeout=WAIT)
    with oai.responses.stream(model="sonnet", input="Hi") as stream:
        text.extend(e.delta for e in stream if e.type == "response.output_text.delta")


def messages(url: str, text: list[str]) -> None:
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0, timeout=WAIT)
    with claude.messages.stream(model="sonnet", max_tokens=100, messages=SAID) as stream:
        text.extend(stream.text_stream)


@pytest.mark.slow  # it waits out the SDKs' timeouts
@pytest.mark.parametrize("streamed", [chat, responses, messages])
def test_a_timeout_in_the_middle_of_a_stream_cancels_the_upstream_call(streamed: Any) -> None:
    """The SDK's read timeout (2 s without a byte) runs out after the first text arrived; it
    gives up (the openai SDK with its ``APITimeoutError``, the anthropic one with its
    transport's ``ReadTimeout``) and hangs up, and the gateway cancels its call to the model:
    no model is left streaming to a client that is gone. Chat and Responses translate
    Claude's stream; the Messages API passes it through."""
    upstream = Stalling()
    with serving(over(Emulator(), upstream)) as (url, _):
        text: list[str] = []
        with pytest.raises((openai.APITimeoutError, httpx2.ReadTimeout)):
            streamed(url, text)
        assert "".join(text) == "Once upon a time"
        assert upstream.closed.wait(30)  # a bound on a hang: it is set at once when right
