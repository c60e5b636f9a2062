"""What no attempt could send is said before anything is sent, as a request or configuration
error, never a retried NetworkError: a header name that is not an HTTP token or a value with a
line break (from a call's extra_headers or the adapter's), a base URL that is not http(s)."""

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


@pytest.mark.parametrize(
    "url", ["ftp://example.com", "file:///etc/passwd", "ws://example.com", "http://", "https:///v1"]
)
def test_a_base_url_that_is_not_http_with_a_host_is_a_config_error(url: str) -> None:
    said = r"base_url: expected a URL with its scheme \(https://host...\), http:// or https://"
    with pytest.raises(ConfigError, match=said):
        metis.complete(MODEL, "Hi", api_key="k", base_url=url)
    with pytest.raises(ConfigError, match=said):
        metis.build_adapter("anthropic", api_key="k", base_url=url)
