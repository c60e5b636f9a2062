"""One TLS context for every client of an httpx (or httpx2) with the default TLS settings:
the library builds a new one per client, reading the whole CA bundle (~80 ms of CPU)."""

from __future__ import annotations

import contextlib
import os
import ssl
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest


@contextlib.contextmanager
def shared_default_contexts(transports: ModuleType) -> Iterator[None]:
    """``transports`` (``httpx._transports.default``, httpx2's, or ``httpx`` itself, whose
    ``create_ssl_context`` the lean transport calls) hands every client with the default
    ``verify`` one context per ``trust_env`` and CA settings of the environment while this
    lasts."""
    original = transports.create_ssl_context
    shared: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:
            return original(verify=verify, cert=cert, trust_env=trust_env)
        settings = os.environ if trust_env else {}
        key = (trust_env, settings.get("SSL_CERT_FILE"), settings.get("SSL_CERT_DIR"))
        if key not in shared:
            shared[key] = original(trust_env=trust_env)
        return shared[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transports, "create_ssl_context", create_ssl_context)
        yield


class LateSharing:
    """Shares the contexts of a client package imported after the run started, for the rest
    of it: httpx2, which the official SDKs (openai, anthropic) build their clients on, is
    imported by the first test that uses one (tests/helpers.py ``ImportOnUse``), ~30 ms of CPU
    a client otherwise. ``share`` is cheap enough to call before every test."""

    PACKAGES = ("httpx2._transports.default",)

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._waiting = list(self.PACKAGES)

    def share(self) -> None:
        for name in tuple(self._waiting):
            module = sys.modules.get(name)
            if module is None:
                continue
            self._waiting.remove(name)
            if getattr(module.create_ssl_context, "__module__", None) != __name__:  # not yet
                self._stack.enter_context(shared_default_contexts(module))

    def close(self) -> None:
        self._stack.close()
