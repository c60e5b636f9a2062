"""A property: a call cancelled (its cancel scope, under asyncio or trio) once its answer's
k-th byte has arrived, whatever k, streamed, whole or a token count, leaves no connection
busy and no call in flight, warns of nothing left unclosed, and the next call on the same
adapter is served whole (no connection half read is used again). The search's size:
tests/conftest.py (METIS_FULL_SEARCH)."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import anyio
import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator
from metis.transport.http1_protocol import Http1Connection
from metis.transport.loop_clients import running_loop

from .. import pool_state
from ..unclosed import unclosed_by

MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
}


class AfterBytes:
    """Cancels ``scope`` once ``left`` bytes of answers have been read (h11 is fed each
    read of the socket, on either backend; the lean transport's protocol each delivery)."""

    def __init__(self) -> None:
        self.left: int | None = None
        self.scope: anyio.CancelScope | None = None

    def fed(self, data: bytes) -> None:
        if self.left is None or self.scope is None or not data:
            return
        self.left -= len(data)
        if self.left <= 0:
            self.scope.cancel()
            self.left = None


def busy(adapter: Adapter) -> int:
    return pool_state.busy_connections(adapter.http_client()) + len(adapter._inflight)


async def one(
    emulator: Emulator, provider: str, kind: str, after: AfterBytes, k: int, loops: list[object]
) -> None:
    loops.append(running_loop())
    config = AdapterConfig(api_key="k", base_url=emulator.base_url(provider), max_retries=0)
    adapter = build_adapter(provider, config)
    request = CanonicalRequest(
        model=MODELS[provider], messages=[Message.user("a story")], max_output_tokens=200
    )
    try:
        with anyio.fail_after(30):  # a bound on a hang, not a timing
            with anyio.CancelScope() as scope:
                after.scope, after.left = scope, k
                if kind == "stream":
                    async for _ in adapter.stream(request):
                        pass
                elif kind == "complete":
                    await adapter.complete(request)
                else:
                    await adapter.count_tokens(request)
            after.scope = after.left = None
            assert busy(adapter) == 0  # released as the scope exits, not later
            answer = await adapter.complete(request)
        assert answer.text and busy(adapter) == 0
    finally:
        await adapter.aclose()


@pytest.fixture
def little_to_collect() -> None:
    """What the worker holds before the search, out of the cyclic collector's reach (as
    tests/conftest.py does after collecting): the two collections of each example walk only
    what the examples made, not what the worker's earlier tests left (60 collections cost
    2 s of CPU late in a run)."""
    gc.collect()
    gc.freeze()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    backend=st.sampled_from(["asyncio", "trio"]),
    provider=st.sampled_from(sorted(MODELS)),
    kind=st.sampled_from(["stream", "complete", "count_tokens"]),
    k=st.integers(min_value=1, max_value=6000),
    transport=st.sampled_from(["lean", "httpx"]),
)
def test_a_call_cancelled_after_k_bytes_leaves_nothing_behind(
    little_to_collect: None,
    emulator_server: Emulator,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    provider: str,
    kind: str,
    k: int,
    transport: str,
) -> None:
    """On either transport of the client metis makes (under trio the lean one hands every
    request to httpx's)."""
    after = AfterBytes()
    receive_data = h11.Connection.receive_data
    data_received = Http1Connection.data_received

    def counted(self: Any, data: bytes) -> None:
        after.fed(data)
        receive_data(self, data)

    def counted_lean(self: Any, data: bytes) -> None:
        data_received(self, data)
        after.fed(data)

    monkeypatch.setenv("METIS_HTTP_TRANSPORT", transport)
    monkeypatch.setattr(h11.Connection, "receive_data", counted)
    monkeypatch.setattr(Http1Connection, "data_received", counted_lean)
    loops: list[object] = []
    gc.collect()  # what other tests left unclosed says so now, not in the block below
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        anyio.run(one, emulator_server, provider, kind, after, k, loops, backend=backend)
        gc.collect()
    assert unclosed_by(caught, loops) == []
