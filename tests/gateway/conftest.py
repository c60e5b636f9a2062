"""Fixtures the gateway's test modules share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A real redis-server on loopback for the module's tests (skipped without coredis)."""
    from ..redis_servers import RedisFactory

    pytest.importorskip("coredis")
    factory = RedisFactory()
    try:
        yield f"redis://127.0.0.1:{factory.server().port}"
    finally:
        factory.close()


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    """The module's provider emulator (a module may define its own)."""
    yield Emulator()


@pytest.fixture(scope="module")
def url(emulator: Emulator) -> Iterator[str]:
    """The module's gateway over its ``emulator``, served on loopback (a module may define its
    own)."""
    with gateway_url(emulator) as served:
        yield served


@pytest.fixture
def claude(url: str) -> Any:
    """The official anthropic SDK's client of the module's gateway (its ``url`` fixture)."""
    return anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)


@pytest.fixture
def oai(url: str) -> Any:
    """The official openai SDK's client of the module's gateway (its ``url`` fixture)."""
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)


@pytest.fixture
def kept_from_first_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The gateway's store of read turns, empty, keeping a turn from its first read (the
    default keeps it at its second: tests/gateway/test_gateway_kept_turns.py tests that)."""
    from metis.gateway import kept_turns

    kept_turns.clear()
    monkeypatch.setattr(kept_turns, "KEPT_ON_READ", 1)
    yield
    kept_turns.clear()
