"""An adapter built outside any event loop serves each loop that calls it: its own pool is
made per loop (a pool's connections belong to the loop that opened them, and a call over one
from a loop that has ended would wait for it forever)."""

from __future__ import annotations

import asyncio

import anyio
import pytest

import metis
from metis import build_adapter
from metis.model import CanonicalRequest, Message
from metis.routing import Router
from metis.testing.emulator import Emulator

BOUND = 60  # seconds: a bound on a call that would otherwise wait forever, not a timing


def hello(model: str) -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=[Message.user("Hi")], max_output_tokens=32)


def test_an_adapter_serves_one_asyncio_run_after_another(emulator_server: Emulator) -> None:
    adapter = build_adapter("anthropic", base_url=emulator_server.url, api_key="k")

    async def call(then_close: bool = False) -> str:
        with anyio.fail_after(BOUND):
            reply = await adapter.complete(hello("anthropic:claude-sonnet-4-5"))
        if then_close:
            await adapter.aclose()
        return reply.text

    first = asyncio.run(call())  # leaves a kept-alive connection of this loop in the pool
    assert asyncio.run(call(then_close=True)) == first == "You said: Hi"


def test_a_router_serves_one_asyncio_run_after_another_and_the_sync_calls(
    emulator_server: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    router = Router(["anthropic:claude-sonnet-4-5"])

    async def call(then_close: bool = False) -> str:
        with anyio.fail_after(BOUND):
            reply = await metis.acomplete(router, "Hi")
        if then_close:
            await router.aclose()
        return reply.text

    assert asyncio.run(call()) == "You said: Hi"
    assert metis.complete(router, "Hi").text == "You said: Hi"  # on metis's own loop
    assert asyncio.run(call(then_close=True)) == "You said: Hi"
