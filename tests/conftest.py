"""Shared fixtures: every async test runs under asyncio and under trio."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# A provider emulator on a free loopback port, per test module (metis.emulator).
from .emulator_fixture import emulator, emulator_server  # noqa: E402, F401
