"""Issue 7 (5): the API key never shows up in logs, errors, reprs, cassettes or telemetry;
TLS verification is on unless turned off explicitly; credentials in a base_url are hidden."""

from __future__ import annotations

import json
import logging
import ssl
from pathlib import Path

import httpx
import pytest

from metis import AdapterConfig, AdapterError, build_adapter
from metis.pipeline.wire import WireRequest
from metis.session import InMemoryToolIdStore
from metis.telemetry import ListSink
from metis.testing.cassette import RecordingTransport

from .fakes import FakePeer, anthropic_error, anthropic_reply, collect, request

KEY = "sk-test-SECRET-0123456789abcdef"
SHORT = "SECRET-0123456789abcdef"  # the distinctive tail, in case only a prefix is redacted


def assert_clean(text: str) -> None:
    assert KEY not in text and SHORT not in text, text


def peer_adapter(peer: FakePeer, provider: str = "anthropic", **config: object):  # type: ignore[no-untyped-def]
    client = httpx.AsyncClient(transport=httpx.MockTransport(peer.handle))
    sink = ListSink()
    adapter = build_adapter(
        provider,
        AdapterConfig(api_key=KEY, http_client=client, **config),  # type: ignore[arg-type]
        tool_id_store=InMemoryToolIdStore(),
        telemetry=sink,
    )
    return adapter, sink


@pytest.mark.anyio
async def test_a_401_echoing_the_key_leaks_it_nowhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="metis")
    peer = FakePeer(anthropic_error(401, "authentication_error", f"invalid x-api-key: {KEY}"))
    adapter, sink = peer_adapter(peer, max_retries=0)
    with pytest.raises(AdapterError) as caught:
        await collect(adapter, request("anthropic"))
    error = caught.value
    assert error.error_class.value == "auth"
    assert peer.requests[0].headers["x-api-key"] == KEY  # it was sent, and only there
    assert_clean(str(error))
    assert_clean(repr(error))
    assert_clean(json.dumps(error.describe()))
    assert_clean(caplog.text)
    assert_clean("\n".join(repr(r.__dict__) for r in caplog.records))
    assert sink.events
    assert_clean(repr(sink.events))


@pytest.mark.anyio
async def test_retries_leak_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="metis")
    overloaded = anthropic_error(529, "overloaded_error", f"busy ({KEY})", **{"retry-after": "0"})
    peer = FakePeer(overloaded, overloaded, anthropic_reply("hello"))
    adapter, sink = peer_adapter(peer, max_retries=2)
    events = await collect(adapter, request("anthropic"))
    assert events[-1].type == "message.complete"
    assert len(peer.requests) == 3
    assert_clean(caplog.text)
    assert_clean("\n".join(repr(r.__dict__) for r in caplog.records))
    assert len(sink.events) >= 3
    assert_clean(repr(sink.events))


def test_reprs_hide_the_key() -> None:
    config = AdapterConfig(api_key=KEY)
    adapter = build_adapter("anthropic", config)
    assert_clean(repr(config))
    assert_clean(repr(adapter))
    assert_clean(repr(adapter.endpoint))
    assert_clean(str(adapter.endpoint))
    wire = WireRequest(
        url="https://api.anthropic.com/v1/messages",
        body={},
        headers=adapter.endpoint.request_headers(),
    )
    assert KEY in wire.headers.values()
    assert_clean(repr(wire))


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini", "openai_responses"])
@pytest.mark.anyio
async def test_recorded_cassettes_hold_no_key(provider: str, tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "bad key", "code": 401}})

    recorder = RecordingTransport(httpx.MockTransport(handler), name="secret")
    client = httpx.AsyncClient(transport=recorder)
    adapter = build_adapter(provider, AdapterConfig(api_key=KEY, http_client=client, max_retries=0))
    with pytest.raises(AdapterError):
        await collect(adapter, request(provider))
    path = tmp_path / "c.yaml"
    recorder.cassette().dump(path)
    assert_clean(path.read_text())


def _verify_mode(client: httpx.AsyncClient) -> ssl.VerifyMode:
    return client._transport._pool._ssl_context.verify_mode  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_tls_verification_is_on_by_default() -> None:
    adapter = build_adapter("anthropic", AdapterConfig(api_key=KEY))
    try:
        context = adapter.http_client()._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert context.verify_mode == ssl.CERT_REQUIRED
        assert context.check_hostname is True
    finally:
        await adapter.close()


@pytest.mark.anyio
async def test_tls_verification_is_off_only_when_asked() -> None:
    client = httpx.AsyncClient(verify=False)
    adapter = build_adapter("anthropic", AdapterConfig(api_key=KEY, http_client=client))
    assert _verify_mode(adapter.http_client()) == ssl.CERT_NONE
    await client.aclose()


CRED_URL = "https://alice:hunter2-PASSWORD@proxy.example.com"


@pytest.mark.parametrize(
    "which",
    [
        "config",
        "adapter",
        "endpoint",
    ],
)
def test_base_url_credentials_are_hidden_in_reprs(which: str) -> None:
    config = AdapterConfig(api_key=KEY, base_url=CRED_URL)
    adapter = build_adapter("anthropic", config)
    text = {"config": repr(config), "adapter": repr(adapter), "endpoint": repr(adapter.endpoint)}
    assert "hunter2-PASSWORD" not in text[which], text[which]


@pytest.mark.anyio
async def test_base_url_credentials_are_hidden_in_errors() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    adapter = build_adapter(
        "anthropic",
        AdapterConfig(api_key=KEY, base_url=CRED_URL, http_client=client, max_retries=0),
    )
    with pytest.raises(AdapterError) as caught:
        await collect(adapter, request("anthropic"))
    for text in (str(caught.value), repr(caught.value), json.dumps(caught.value.describe())):
        assert "hunter2-PASSWORD" not in text, text
