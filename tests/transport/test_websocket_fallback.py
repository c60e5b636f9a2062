"""The fallback to HTTP (docs/websocket.md "When the mode is unavailable"): an upgrade answered
with 404, 426, 501 or a success that is not 101 (by a loopback peer in front of the emulator,
which then relays the POSTs) sends the session's turns over HTTP; any other refusal is the
call's error. Under asyncio and trio, on real sockets."""

from __future__ import annotations

import pytest

import metis
from metis.adapter import Adapter
from metis.errors import AdapterError
from metis.testing.emulator import Emulator

from ..fault_proxy import FaultProxy, response
from .test_websocket_mode import STACK, get_weather, session_on, turns


def upstream(emulator: Emulator) -> tuple[str, int]:
    return ("127.0.0.1", emulator.port)


def ws_adapter_at(url: str) -> Adapter:
    return metis.build_adapter(STACK, api_key="k", base_url=url, max_retries=0)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 426, 501, 200])
async def test_an_upgrade_answered_without_the_mode_falls_back_to_http(
    status: int, emulator: Emulator
) -> None:
    async with FaultProxy.running(upstream(emulator)) as proxy:
        proxy.script(response(status, b'{"error": {"message": "no websocket here"}}'))
        adapter = ws_adapter_at(proxy.url)
        async with adapter, session_on(adapter, tools=[get_weather]) as session:
            result = await session.arun("What's the weather in Paris?")
            assert result.reason == "complete"
            assert (await session.asend("Thanks")).text == "You said: Thanks"
    methods = [r.method for r in proxy.requests]
    assert methods == ["GET", "POST", "POST", "POST"]  # the mode tried once, then HTTP
    assert proxy.requests[0].headers["upgrade"].lower() == "websocket"
    assert [r.websocket for r in turns(emulator)] == [0, 0, 0]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 403])
async def test_an_upgrade_refused_otherwise_is_the_calls_error_and_nothing_is_sent(
    status: int, emulator: Emulator
) -> None:
    async with FaultProxy.running(upstream(emulator)) as proxy:
        proxy.script(response(status, b'{"error": {"message": "not for you"}}'))
        adapter = ws_adapter_at(proxy.url)
        async with adapter, session_on(adapter) as session:
            with pytest.raises(AdapterError, match="not for you") as raised:
                await session.asend("Hello")
    assert raised.value.provider_status == status
    assert [r.method for r in proxy.requests] == ["GET"]
    assert turns(emulator) == []
