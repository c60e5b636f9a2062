"""What the library leaves out as it encodes a request is known before the upstream is
called: a translated stream's ``x-metis-dropped`` names it, as a whole reply's does
(docs/gateway.md), beside what the gateway's reader left out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator, tools
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_url

TOOL = {"type": "function", "function": WEATHER_FUNCTION}


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    yield Emulator(model=[tools(("get_weather", {"city": "Paris"}))] * 8, models="any")


@pytest.fixture(scope="module")
def url(emulator: Emulator) -> Iterator[str]:
    with gateway_url(emulator) as served:
        yield served


def _ask(url: str, stream: bool, **more: Any) -> httpx.Response:
    body = {
        "model": "flash",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [TOOL],
        "parallel_tool_calls": False,
        "stream": stream,
        **more,
    }
    headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_what_the_library_drops_while_encoding_is_in_the_head(url: str, stream: bool) -> None:
    reply = _ask(url, stream, logprobs=True)
    named = reply.headers["x-metis-dropped"].split("; ")
    assert "logprobs" in named  # the gateway's reader left it out
    assert any(n.startswith("parallel_tool_calls (") for n in named)  # the library did


def test_a_stream_with_nothing_dropped_has_no_header(url: str) -> None:
    assert "x-metis-dropped" not in _ask(url, True, parallel_tool_calls=True).headers
