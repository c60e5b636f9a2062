"""An adapter's own client set up outside any event loop (``adapter.http_client().headers[...]
= ...`` at start-up, as docs/http-client.md shows) is the set-up of every loop's client: the
next ``asyncio.run``, trio, and threads each running a loop at once all send what was set, each
over a client of its own loop (metis/transport/loop_clients.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import trio

from metis import build_adapter
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"
GUARD_SECONDS = 60


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def _request() -> CanonicalRequest:
    return CanonicalRequest(model=MODEL, messages=[Message.user("Hi")], max_output_tokens=32)


def test_headers_set_outside_any_loop_go_with_every_loops_calls(at_emulator: Emulator) -> None:
    """Before: the first loop's calls alone sent them; the next loop's client was a new one
    made without them."""
    adapter = build_adapter("anthropic")
    adapter.http_client().headers["x-tenant"] = "acme"
    adapter.http_client().params = {"tenant": "acme"}
    asyncio.run(adapter.complete(_request()))
    asyncio.run(adapter.complete(_request()))
    trio.run(adapter.complete, _request())
    sent = at_emulator.requests
    assert [request.headers.get("x-tenant") for request in sent] == ["acme"] * 3
    assert [request.query.get("tenant") for request in sent] == ["acme"] * 3


def test_threads_each_on_a_loop_of_their_own_take_clients_of_their_own(
    at_emulator: Emulator,
) -> None:
    adapter = build_adapter("anthropic")
    adapter.http_client().headers["x-tenant"] = "acme"
    clients: list[object] = []
    go = threading.Barrier(8)

    def one() -> None:
        async def call() -> None:
            clients.append(adapter.http_client())
            await adapter.complete(_request())

        go.wait()
        asyncio.run(call())

    threads = [threading.Thread(target=one, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD_SECONDS)
    assert len(clients) == 8 and len({id(client) for client in clients}) == 8
    assert [request.headers.get("x-tenant") for request in at_emulator.requests] == ["acme"] * 8
