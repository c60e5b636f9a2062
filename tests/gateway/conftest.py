"""Fixtures the gateway's test modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
