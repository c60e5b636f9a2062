"""A failure to reach an upstream, said to the gateway's client without the upstream's address
(docs/gateway.md, "Errors"): its class and what went wrong, never the internal host, IP or port
the gateway connects to; the operator's access line keeps the whole message."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from metis.errors import InvalidRequestError, NetworkError, ProtocolError, RedirectError
from metis.gateway.app import create_app
from metis.gateway.hidden import shown
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
SAID = [{"role": "user", "content": "Hi"}]
ASKED = [
    ("anthropic", "/v1/messages", {"model": "sonnet", "max_tokens": 9, "messages": SAID}),
    ("anthropic", "/v1/messages", {"model": "flash", "max_tokens": 9, "messages": SAID}),
    ("chat", "/v1/chat/completions", {"model": "gpt", "messages": SAID}),
    ("responses", "/v1/responses", {"model": "gpt5", "input": "Hi"}),
]
HIDDEN = ("10.0.0.5", "443", "llm.internal.corp")


def refusing(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connect call failed ('10.0.0.5', 443)", request=request)


def config(emulator: Emulator) -> Any:
    original = emulator.client
    emulator.client = lambda: httpx.AsyncClient(  # type: ignore[method-assign]
        transport=httpx.MockTransport(refusing)
    )
    try:
        return gateway_config(emulator, gateway={"access_log": True})
    finally:
        emulator.client = original  # type: ignore[method-assign]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_refused_connection_is_said_without_the_upstreams_address(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(config(Emulator(model=[], models="any")))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    caplog.set_level(logging.INFO, logger="metis.gateway")
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
        for api, path, body in ASKED:
            reply = await gw.post(
                path, json={**body, "stream": stream}, headers={"x-api-key": GATEWAY_KEY}
            )
            said = f"{api} {body['model']}: {reply.text}"
            assert reply.status_code == 502, said
            message = reply.json()["error"]["message"]
            assert "connection to" in message and "failed" in message, said
            assert not any(hidden in message for hidden in HIDDEN), said
    lines = [r.getMessage() for r in caplog.records if "metis.gateway.access" in str(r.__dict__)]
    assert len(lines) == len(ASKED), lines
    assert all("10.0.0.5" in line for line in lines), lines


def test_only_the_address_is_taken_out_and_only_of_what_the_gateway_says() -> None:
    cases = [
        (
            NetworkError(
                "connection to anthropic at http://10.0.0.5:443 failed while sending the request: "
                "ConnectError: [Errno 111] Connect call failed ('10.0.0.5', 443)",
                provider="anthropic",
            ),
            "connection to anthropic failed while sending the request: ConnectError: "
            "[Errno 111] Connect call failed (the upstream)",
        ),
        (
            NetworkError(
                "connection to openai at https://llm.internal.corp:8443 timed out while connecting:"
                " ConnectTimeout: looking up llm.internal.corp timed out",
                provider="openai",
            ),
            "connection to openai timed out while connecting: ConnectTimeout: looking up the "
            "upstream timed out",
        ),
        (
            RedirectError(
                "redirected to http://[fd00::5]:8080/v1, another origin; refused",
                provider="openai",
                provider_status=307,
            ),
            "redirected to the upstream, another origin; refused",
        ),
    ]
    cases.append(
        (
            ProtocolError(
                "bedrock sent anthropic.claude-haiku-4-5-20251001-v1:0 an answer that is not JSON"
                " (from http://10.0.0.5:8080)",
                provider="bedrock",
            ),
            "bedrock sent anthropic.claude-haiku-4-5-20251001-v1:0 an answer that is not JSON"
            " (from the upstream)",
        )
    )
    for error, expected in cases:
        assert shown(error) == expected
        assert "10.0.0.5" in error.message or "internal" in error.message or "fd00" in error.message
    own = InvalidRequestError("see https://docs.anthropic.com/en/api/errors", provider="anthropic")
    assert shown(own) == own.message  # the provider's own answer, as it gave it


def test_an_index_in_brackets_is_no_address() -> None:
    """A provider's message naming a place in the request (``input[1].id``) was told as
    ``inputthe upstream.id``: ``[1]`` read as an IPv6 address. One holds a colon."""
    said = "Missing required parameter: 'input[1].id'. Also 'tools[0][12]' and [a]."
    for error in (
        InvalidRequestError(said, provider="openai", provider_status=400),
        ProtocolError(said, provider="openai"),
        NetworkError(f"connection to openai failed: {said}", provider="openai"),
    ):
        assert "input[1].id" in shown(error) and "tools[0][12]" in shown(error), shown(error)
    for address in ("[::1]:8080", "[fd00::5]", "[fe80::1%eth0]:443", "[2001:db8::1]"):
        told = shown(NetworkError(f"connection failed to {address} now", provider="openai"))
        assert told == "connection failed to the upstream now", told


def test_an_index_in_brackets_is_not_taken_for_an_ipv6_address() -> None:
    """A provider's refusal naming where it found the problem (``messages[2].content[0]``) is
    passed on as it came: before, each ``[n]`` was read as an IPv6 address and said as "the
    upstream" (``messagesthe upstream.contentthe upstream``)."""
    said = "messages[2].content[0].source: expected an inline or linked picture; tools[12] too"
    refused = InvalidRequestError(said, provider="anthropic", provider_status=400)
    assert shown(refused) == said
    behind = InvalidRequestError("no route to [fd00::5]:8080 or [::1]", provider="openai")
    assert shown(behind) == "no route to the upstream or the upstream"
