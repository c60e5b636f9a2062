"""Fixtures of the transport tests, the only ones that build httpx2 clients."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def one_default_httpx2_tls_context() -> Iterator[None]:
    """tests/conftest.py's ``one_default_tls_context`` for httpx2: every httpx2 client with the
    default TLS settings shares one context, instead of reading the whole CA bundle again
    (~80 ms of CPU a client). Requested by the fixtures and tests that build httpx2 clients."""
    import httpx2._transports.default as httpx2_transports

    original = httpx2_transports.create_ssl_context
    shared: dict[bool, ssl.SSLContext] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:
            return original(verify=verify, cert=cert, trust_env=trust_env)
        if trust_env not in shared:
            shared[trust_env] = original(trust_env=trust_env)
        return shared[trust_env]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpx2_transports, "create_ssl_context", create_ssl_context)
        yield
