"""Shared fixtures: every async test runs under asyncio and under trio."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metis.pipeline.warned import session_warnings


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def fresh_session_warnings() -> Iterator[None]:
    """Each test starts with no session already warned (tests reuse session ids)."""
    session_warnings.clear()
    yield
    session_warnings.clear()


# A provider emulator on a free loopback port, per test module (metis.testing.emulator).
from .emulator_fixture import emulator, emulator_server  # noqa: E402, F401
