"""Fixtures of the transport tests, the only ones that build httpx2 clients."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest

from ..tls_sharing import shared_default_contexts
from .loops import Runner


@pytest.fixture(scope="session")
def one_default_httpx2_tls_context() -> Iterator[None]:
    """tests/conftest.py's ``one_default_tls_context`` for httpx2: every httpx2 client with the
    default TLS settings shares one context, instead of reading the whole CA bundle again
    (~80 ms of CPU a client). Requested by the fixtures and tests that build httpx2 clients."""
    import httpx2._transports.default as httpx2_transports

    with shared_default_contexts(httpx2_transports):
        yield


def _uvloop_run(main: Awaitable[Any]) -> Any:
    uvloop = pytest.importorskip("uvloop")
    return uvloop.run(main)


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Runs a test's coroutine on asyncio's loop, then on uvloop's (skipped without uvloop)."""
    return asyncio.run if request.param == "asyncio" else _uvloop_run  # type: ignore[return-value]
