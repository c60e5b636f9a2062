"""pytest fixtures for :mod:`metis.testing.emulator`: a real loopback server speaking every
provider's wire format. Wire them into ``conftest.py`` with::

    from .emulator_fixture import emulator, emulator_server  # noqa: F401

``emulator_server`` starts one emulator on a free port for the test module and stops it after
the module's last test. It serves the catalog's models and :data:`LOCAL_MODELS`, the names
the tests give models of local and self-hosted servers (vLLM, llama.cpp, TGI, Ollama, an Open
Responses server) and of SambaNova, which no catalog lists. ``emulator`` is that server with
its counters, recorded requests, queued faults, stored responses and prompt cache reset for
each test, so a test can assert on ``emulator.stats`` and ``emulator.requests`` from zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported when a test asks for it (the xdist controller never does)
    from metis.testing.emulator import Emulator

LOCAL_MODELS = ("qwen", "local", "tgi", "qwen3:8b", "some-model", "Meta-Llama-3.3-70B-Instruct")


@pytest.fixture(scope="module")
def emulator_server() -> Iterator[Emulator]:
    from metis.testing.emulator import Emulator

    with Emulator(host="127.0.0.1", port=0, models=LOCAL_MODELS) as server:
        yield server


@pytest.fixture
def emulator(emulator_server: Emulator) -> Emulator:
    emulator_server.reset()
    return emulator_server
