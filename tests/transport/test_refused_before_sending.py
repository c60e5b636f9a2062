"""What no attempt could send is said before anything is sent, as a request or configuration
error, never a retried NetworkError: a header name that is not an HTTP token or a value with a
line break (from a call's extra_headers or the adapter's), a header value that is not ASCII
(an API key pasted with a curly quote or an ellipsis), a URL httpx cannot encode, a base URL
that is not http(s) or not a URL at all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import metis
from metis.errors import ConfigError, InvalidRequestError
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"
BAD_HEADERS = [
    ({"bad header": "x"}, "the header name 'bad header' is not an HTTP token"),
    ({"x-a:b": "x"}, "the header name 'x-a:b' is not an HTTP token"),
    ({"": "x"}, "the header name '' is not an HTTP token"),
    ({"x-a": "one\r\nx-injected: 1"}, "the value of header 'x-a' holds a line break or NUL"),
    ({"x-a": "nul\0"}, "the value of header 'x-a' holds a line break or NUL"),
]


@pytest.mark.parametrize(("headers", "said"), BAD_HEADERS)
def test_a_header_no_request_can_carry_is_an_invalid_request_not_sent_nor_retried(
    emulator: Emulator, headers: dict[str, str], said: str
) -> None:
    given: dict[str, Any] = {"extra_headers": {"anthropic": headers}}
    with pytest.raises(InvalidRequestError) as caught:
        metis.complete(MODEL, "Hi", api_key="k", base_url=emulator.url, max_retries=3, **given)
    assert said in str(caught.value)
    assert "injected" not in str(caught.value)  # a value is never shown
    adapter = metis.build_adapter(
        "anthropic", api_key="k", base_url=emulator.url, extra_headers=headers, max_retries=3
    )
    request = metis.CanonicalRequest(
        model="claude-sonnet-4-5", messages=[metis.Message.user("Hi")], max_output_tokens=9
    )

    async def main() -> None:
        try:
            with pytest.raises(InvalidRequestError, match=r"is not an HTTP token|line break"):
                await adapter.complete(request)
        finally:
            await adapter.aclose()

    asyncio.run(main())
    assert emulator.stats.requests == 0
    assert metis.complete(MODEL, "Hi", api_key="k", base_url=emulator.url).text == "You said: Hi"


NOT_ASCII = [
    ({"api_key": "sk-ant-\u2026"}, "the value of header 'x-api-key' is not ASCII"),
    ({"api_key": "sk-ant-\u201ck\u201d"}, "the value of header 'x-api-key' is not ASCII"),
    ({"api_key": "sk-ant-k\ud800"}, "the value of header 'x-api-key' is not ASCII"),
    ({"extra_headers": {"x-user": "Jos\u00e9"}}, "the value of header 'x-user' is not ASCII"),
    ({"base_url": "http://127.0.0.1:9/\ud800"}, "the URL 'http://127.0.0.1:9/\ufffd/v1/messages'"),
    ({"extra_headers": {"x-\u00e9": "x"}}, "the header name 'x-\u00e9' is not an HTTP token"),
]


@pytest.mark.parametrize(("given", "said"), NOT_ASCII)
def test_a_key_header_or_url_httpx_cannot_encode_is_an_invalid_request_not_sent(
    emulator: Emulator, given: dict[str, Any], said: str
) -> None:
    """Each was a bare UnicodeEncodeError from httpx (a lone surrogate in the key one from the
    redaction of that error), the key's characters in its message."""
    chosen = {"api_key": "k", "base_url": emulator.url, "max_retries": 3, **given}
    adapter = metis.build_adapter("anthropic", **chosen)
    request = metis.CanonicalRequest(
        model="claude-sonnet-4-5", messages=[metis.Message.user("Hi")], max_output_tokens=9
    )

    async def main() -> None:
        try:
            with pytest.raises(InvalidRequestError) as caught:
                await adapter.complete(request)
        finally:
            await adapter.aclose()
        assert said in str(caught.value) and "nothing was sent" in str(caught.value)
        assert "sk-ant" not in str(caught.value) and caught.value.__cause__ is None

    asyncio.run(main())
    assert emulator.stats.requests == 0


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com",
        "file:///etc/passwd",
        "ws://example.com",
        "http://",
        "https:///v1",
        "http://[::1",  # urlsplit's bare ValueError, 'Invalid IPv6 URL'
    ],
)
def test_a_base_url_that_is_not_http_with_a_host_is_a_config_error(url: str) -> None:
    said = r"base_url: expected a URL with its scheme \(https://host...\), http:// or https://"
    with pytest.raises(ConfigError, match=said):
        metis.complete(MODEL, "Hi", api_key="k", base_url=url)
    with pytest.raises(ConfigError, match=said):
        metis.build_adapter("anthropic", api_key="k", base_url=url)


@pytest.mark.parametrize("host", ["[::1", "[fe80::1"])
def test_an_ollama_host_that_is_no_host_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", host)
    with pytest.raises(ConfigError, match="OLLAMA_HOST: expected host"):
        metis.build_adapter("ollama")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"api_key": "sk-ant-\u2026"}, "the value of header 'authorization' is not ASCII"),
        ({"api_key": "sk-ant-k\u00e9y"}, "the value of header 'authorization' is not ASCII"),
        ({"api_key": "sk-ant-k\ud800"}, "the value of header 'authorization' is not ASCII"),
        ({"extra_headers": {"x-user": "Jos\u00e9"}}, "the value of header 'x-user' is not ASCII"),
        ({"extra_headers": {"x-a": "one\r\nx-b: 2"}}, "the value of header 'x-a' holds a line"),
        ({"extra_headers": {"bad header": "x"}}, "the header name 'bad header' is not an HTTP"),
        ({"extra_headers": {"x-\u00e9": "x"}}, "the header name 'x-\u00e9' is not an HTTP token"),
    ],
)
def test_what_no_websocket_upgrade_can_carry_is_an_invalid_request_not_sent(
    emulator: Emulator, given: dict[str, Any], said: str
) -> None:
    """The WebSocket mode's upgrade let out a bare UnicodeEncodeError (latin-1) or h11's
    LocalProtocolError, and sent a key of Latin-1 characters (k\u00e9y) as its bytes."""
    from metis.sessions import Session

    chosen = {"api_key": "k", "base_url": emulator.url, "max_retries": 0, **given}
    adapter = metis.build_adapter("openai_responses_ws", **chosen)

    async def main() -> None:
        session = Session("openai_responses_ws:gpt-5", adapters={"openai_responses_ws": adapter})
        try:
            with pytest.raises(InvalidRequestError) as caught:
                await session.asend("Hi")
        finally:
            await session.aclose()
            await adapter.aclose()
        assert said in str(caught.value) and "nothing was sent" in str(caught.value)
        assert "sk-ant" not in str(caught.value)

    asyncio.run(main())
    assert emulator.stats.requests == 0
