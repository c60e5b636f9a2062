"""Issue 7 (5): the API key never shows up in logs, errors, reprs, cassettes or telemetry;
TLS verification is on unless turned off explicitly; credentials in a base_url are hidden."""

from __future__ import annotations

import base64
import gzip
import json
import logging
import ssl
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import yaml

from metis import AdapterConfig, AdapterError, build_adapter
from metis.errors import AuthError, NetworkError, redact
from metis.pipeline.request import WireRequest
from metis.pipeline.stores import InMemoryToolIdStore
from metis.telemetry import ListSink, LoggingSink, MultiSink
from metis.testing.cassette import Cassette, RecordingTransport
from metis.testing.scrub import scrub_chunks, secret_pattern

from ..fakes import (
    FakePeer,
    Reply,
    anthropic_end,
    anthropic_error,
    anthropic_reply,
    anthropic_start,
    collect,
    openai_error,
    request,
    sse,
)
from ..pool_state import tls_context
from ..reliability_helpers import ChunkStream

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

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
        context = tls_context(adapter.http_client())  # the lean transport's, or httpx's
        assert context.verify_mode == ssl.CERT_REQUIRED
        assert context.check_hostname is True
    finally:
        await adapter.aclose()


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


# Issue 11 (12): the exact configured key, whatever its shape -------------------------------

KEY_SHAPES = {
    "groq": "gsk_Q7xPz0000groqSECRETvalue111",
    "huggingface": "hf_QqZZSECRETvalue2222tokenhf",
    "xai": "xai-SECRETxaiValue3333abcdefgh",
    "short": "k-42Xy",
    "short-anthropic": "sk-ant-x9Q",
    "opaque": "a1b2c3d4e5f6SECRETopaque",
    "slashed": "abc/def+SECRET=9",
}


def _leaks(text: str, key: str) -> bool:
    forms = {key, json.dumps(key)[1:-1], key.replace("/", "\\/"), quote(key, safe="")}
    return any(form in text for form in forms)


def _echo(status: int, provider: str, message: str) -> Reply:
    if provider == "anthropic":
        return anthropic_error(status, "authentication_error", message)
    return openai_error(status, "invalid_api_key", message)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("shape", list(KEY_SHAPES))
@pytest.mark.anyio
async def test_the_exact_key_is_redacted_whatever_its_shape(
    shape: str, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = KEY_SHAPES[shape]
    caplog.set_level(logging.DEBUG)
    peer = FakePeer(_echo(401, provider, f"Incorrect API key provided: {key}. Key {key!r}"))
    client = httpx.AsyncClient(transport=httpx.MockTransport(peer.handle))
    sink = ListSink()
    adapter = build_adapter(
        provider,
        AdapterConfig(api_key=key, http_client=client, max_retries=0),
        tool_id_store=InMemoryToolIdStore(),
        telemetry=MultiSink(sink, LoggingSink()),
    )
    with pytest.raises(AuthError) as caught:
        await collect(adapter, request(provider))
    error = caught.value
    for text in (
        str(error),
        repr(error),
        json.dumps(error.describe()),
        repr(sink.events),
        caplog.text,
        "\n".join(repr(r.__dict__) for r in caplog.records),
    ):
        assert not _leaks(text, key), text
    assert "[REDACTED]" in str(error)


def test_a_short_key_is_hidden_only_where_it_stands_alone() -> None:
    text = "bad key abc1 (abc1); model abc1x and xabc1 are fine"
    assert redact(text, "abc1") == "bad key [REDACTED] ([REDACTED]); model abc1x and xabc1 are fine"


@pytest.mark.parametrize("key", KEY_SHAPES.values())
def test_redact_hides_json_escaped_and_percent_encoded_forms(key: str) -> None:
    text = f"raw {key} json {json.dumps(key)} url ?k={quote(key, safe='')}"
    assert not _leaks(redact(text, key), key)


HEADER_KEY = "pk-live-HEADERsecret-7777"
QUERY_KEY = "QUERYsecret-8888-zzzz"
PROXY = f"https://gateway.example.com/anthropic?api-version=2024-01-01&key={QUERY_KEY}"


def _proxy_adapter(peer: FakePeer, sink: ListSink | None = None) -> Any:
    client = httpx.AsyncClient(transport=httpx.MockTransport(peer.handle))
    return build_adapter(
        "anthropic",
        AdapterConfig(
            api_key=KEY,
            base_url=PROXY,
            extra_headers={"x-gateway-api-key": HEADER_KEY, "x-team": "blue"},
            http_client=client,
            max_retries=0,
        ),
        tool_id_store=InMemoryToolIdStore(),
        telemetry=sink,
    )


def _assert_no_extra_secrets(text: str) -> None:
    assert HEADER_KEY not in text and QUERY_KEY not in text, text
    assert_clean(text)


def test_a_base_url_query_string_is_kept_after_the_path() -> None:
    adapter = _proxy_adapter(FakePeer())
    url = adapter.endpoint.url(stream=True, model="m")
    assert url == f"https://gateway.example.com/anthropic/v1/messages?{PROXY.split('?')[1]}"
    headers = adapter.endpoint.request_headers()
    assert headers["x-gateway-api-key"] == HEADER_KEY and headers["x-team"] == "blue"


def test_header_and_query_keys_are_hidden_in_reprs() -> None:
    adapter = _proxy_adapter(FakePeer())
    wire = WireRequest(
        url=adapter.endpoint.url(stream=True, model="m"),
        body={},
        headers=adapter.endpoint.request_headers(),
    )
    for text in (repr(adapter.config), repr(adapter), repr(adapter.endpoint), repr(wire)):
        _assert_no_extra_secrets(text)
    assert "blue" in repr(adapter.config) and "api-version=2024-01-01" in repr(wire)


@pytest.mark.anyio
async def test_header_and_query_keys_echoed_by_the_server_are_hidden(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"gateway refused {HEADER_KEY} for ?key={QUERY_KEY}"
    sink = ListSink()
    peer = FakePeer(anthropic_error(403, "permission_error", echo))
    with pytest.raises(AdapterError) as caught:
        await collect(_proxy_adapter(peer, sink), request("anthropic"))
    assert peer.requests[0].url.params["key"] == QUERY_KEY  # sent, and only there
    error = caught.value
    for text in (str(error), repr(error), json.dumps(error.describe()), repr(sink.events)):
        _assert_no_extra_secrets(text)
    _assert_no_extra_secrets(caplog.text)


@pytest.mark.anyio
async def test_the_request_line_httpx_logs_hides_the_query_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="httpx")
    peer = FakePeer(httpx.ConnectError(f"cannot reach {PROXY}"))
    with pytest.raises(NetworkError) as caught:
        await collect(_proxy_adapter(peer), request("anthropic"))
    peer = FakePeer(anthropic_reply("hello"))
    await collect(_proxy_adapter(peer), request("anthropic"))
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert any("HTTP Request: POST https://gateway.example.com" in line for line in lines), lines
    assert any("api-version=2024-01-01" in line for line in lines)
    for text in (*lines, str(caught.value), repr(caught.value.__cause__)):
        _assert_no_extra_secrets(text)


# Issue 11 (13): cassettes never hold the key --------------------------------------------

PLANTED = "sk-ant-api03-PLANTED/key+9876543210"


def _all_forms_absent(text: str) -> None:
    escaped_chars = "".join(f"\\u{ord(c):04x}" for c in PLANTED)
    for form in (
        PLANTED,
        json.dumps(PLANTED)[1:-1],
        PLANTED.replace("/", "\\/"),
        quote(PLANTED, safe=""),
        escaped_chars,
        escaped_chars.upper(),
        "PLANTED",  # any part of the key's distinctive middle
    ):
        assert form not in text, form


def _bodies(cassette_text: str) -> str:
    """Everything a cassette holds, with base64 chunks decoded."""
    data = yaml.safe_load(cassette_text)
    parts = [cassette_text]
    for interaction in data["interactions"]:
        for chunk in interaction["response"].get("chunks_base64", []):
            parts.append(base64.b64decode(chunk).decode("latin-1"))
    return "\n".join(parts)


def _gzip_chunks(body: bytes, size: int) -> list[bytes]:
    packed = gzip.compress(body)
    return [packed[i : i + size] for i in range(0, len(packed), size)]


def _deflate(body: bytes, raw: bool) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return packer.compress(body) + packer.flush()


ECHO = f'{{"error": {{"message": "bad key {PLANTED}", "json": {json.dumps(PLANTED)}}}}}'.encode()
SPLIT = PLANTED.encode()
PLANTINGS: dict[str, tuple[dict[str, str], list[bytes]]] = {
    "plain": ({}, [ECHO]),
    "gzip": ({"content-encoding": "gzip"}, _gzip_chunks(ECHO * 3, 7)),
    "deflate": ({"content-encoding": "deflate"}, [_deflate(ECHO, raw=False)]),
    "raw-deflate": ({"content-encoding": "deflate"}, [_deflate(ECHO, raw=True)]),
    "across-chunks": ({}, [b'data: {"t": "' + SPLIT[:9], SPLIT[9:20], SPLIT[20:] + b'"}\n\n']),
    "json-slash": ({}, [json.dumps({"k": PLANTED}).replace("/", "\\/").encode()]),
    "json-unicode-escapes": (
        {},
        [b'{"k": "' + "".join(f"\\u{ord(c):04X}" for c in PLANTED).encode() + b'"}'],
    ),
    "percent-encoded": ({}, [f"https://x.test/?key={quote(PLANTED, safe='')}".encode()]),
    "not-utf8": ({}, [b"\xff\xfe\x00" + SPLIT[:5], SPLIT[5:] + b"\x80\x81"]),
    "echoed-header": ({"x-echo": f"seen {PLANTED}"}, [b"{}"]),
}


@pytest.mark.parametrize("case", list(PLANTINGS))
@pytest.mark.anyio
async def test_recorded_cassettes_never_hold_a_planted_key(case: str, tmp_path: Path) -> None:
    headers, chunks = PLANTINGS[case]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream", **headers},
            stream=ChunkStream(chunks),
        )

    recorder = RecordingTransport(httpx.MockTransport(handler), name="planted")
    async with httpx.AsyncClient(transport=recorder) as client:
        response = await client.post(
            f"https://gateway.test/v1/messages?key={PLANTED}",
            headers={"x-api-key": PLANTED},
            json={"echo": PLANTED},
        )
        received = response.content  # what the application saw
    path = tmp_path / "c.yaml"
    recorder.cassette().dump(path)
    text = path.read_text()
    _all_forms_absent(_bodies(text))
    assert "[REDACTED]" in text
    replayed = Cassette.load(path).interactions[0].response
    body = b"".join(replayed.body_chunks())
    assert "content-encoding" not in replayed.headers  # stored decoded
    assert (
        body.replace(b"[REDACTED]", b"") == body
        if case == "echoed-header"
        else b"[REDACTED]" in body
    )
    assert len(body) < len(received) * 2 + 100


def test_scrub_chunks_keeps_boundaries_and_hides_a_split_key() -> None:
    pattern = secret_pattern(["abcdefghij"])
    chunks = [b"12abc", b"def", b"ghij34", b"abcdefghij"]
    assert scrub_chunks(chunks, pattern) == [b"12[REDACTED]", b"34", b"[REDACTED]"]
    assert scrub_chunks([b"x abc1 abc1x"], secret_pattern(["abc1"])) == [b"x [REDACTED] abc1x"]


@pytest.mark.anyio
async def test_tool_arguments_quoting_the_key_are_logged_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Arguments that are not a JSON object are kept and logged: the model may quote the key.
    tool = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    }
    delta = {"type": "input_json_delta", "partial_json": json.dumps(f"my key is {KEY}")}
    reply = Reply(
        chunks=sse(
            anthropic_start(),
            tool,
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            *anthropic_end("tool_use"),
        )
    )
    caplog.set_level(logging.DEBUG, logger="metis")
    adapter, _ = peer_adapter(FakePeer(reply))
    events = await collect(adapter, request("anthropic"))
    assert events[-1].type == "message.complete"
    logged = [
        r for r in caplog.records if getattr(r, "event", None) == "metis.invalid_tool_arguments"
    ]
    assert len(logged) == 1
    assert "my key is" in logged[0].getMessage()
    assert_clean(logged[0].getMessage())
