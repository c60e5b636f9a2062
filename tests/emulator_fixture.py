"""pytest fixtures for :mod:`metis.testing.emulator`: a real loopback server speaking every
provider's wire format. Wire them into ``conftest.py`` with::

    from .emulator_fixture import emulator, emulator_server  # noqa: F401

``emulator_server`` starts one emulator on a free port for the test module and stops it after
the module's last test. ``emulator`` is that server with its counters, recorded requests,
queued faults, stored responses and prompt cache reset for each test, so a test can assert on
``emulator.stats`` and ``emulator.requests`` from zero.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metis.testing.emulator import Emulator


@pytest.fixture(scope="module")
def emulator_server() -> Iterator[Emulator]:
    with Emulator(host="127.0.0.1", port=0) as server:
        yield server


@pytest.fixture
def emulator(emulator_server: Emulator) -> Emulator:
    emulator_server.reset()
    return emulator_server
