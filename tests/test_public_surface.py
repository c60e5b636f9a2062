"""The public surface (docs/api.md): the names users import, one meaning and one place each."""

from __future__ import annotations

import inspect
import re
import warnings
from typing import Any

import pytest

import metis
import metis.errors
import metis.registry
from metis import Registry, Router, build_adapter
from metis.core import deprecation
from metis.errors import AdapterError, AuthError, ConfigError, ErrorClass, NotConfiguredError
from metis.redis.tool_ids import RedisToolIdStore


def test_not_configured_is_an_auth_error_of_the_taxonomy() -> None:
    error = NotConfiguredError("no key", model="m:x", adapter="anthropic", api_key_env="K")
    assert isinstance(error, AuthError) and isinstance(error, AdapterError)
    assert error.error_class is ErrorClass.AUTH and not error.retryable
    assert (error.provider, error.adapter, error.model, error.api_key_env) == (
        "anthropic",
        "anthropic",
        "m:x",
        "K",
    )
    assert isinstance(error, ConfigError)  # what it was; kept for one release
    assert metis.NotConfiguredError is metis.registry.NotConfiguredError is NotConfiguredError


@pytest.fixture
def fresh_deprecations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each deprecated name warns once per process: forget which already did."""
    monkeypatch.setattr(deprecation, "_warned", set())


def closing_objects() -> list[Any]:
    adapter = build_adapter("anthropic", api_key="k")
    router = Router(["anthropic:claude-sonnet-4-5"], adapters={"anthropic": adapter})
    registry = Registry.from_dict({"adapters": {}, "models": {}})
    return [adapter, router, registry, RedisToolIdStore("redis://localhost:1")]


def test_every_object_that_holds_something_closes_with_aclose() -> None:
    for holder in closing_objects():
        assert inspect.iscoroutinefunction(holder.aclose), type(holder).__name__
        assert inspect.iscoroutinefunction(type(holder).__aexit__)


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_deprecations")
async def test_close_and_dispose_are_aliases_of_aclose_that_warn_once() -> None:
    adapter = build_adapter("anthropic", api_key="k")
    router = Router(["anthropic:claude-sonnet-4-5"])
    for closing, name in [
        (adapter.close, "Adapter.close()"),
        (adapter.dispose, "Adapter.dispose()"),
        (router.close, "Router.close()"),
    ]:
        with pytest.warns(DeprecationWarning, match=re.escape(name)):
            await closing()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            await closing()  # once per process


@pytest.mark.anyio
async def test_aclose_releases_the_pool_the_adapter_made() -> None:
    adapter = build_adapter("anthropic", api_key="k")
    client = adapter.http_client()
    await adapter.aclose()
    assert client.is_closed
    async with build_adapter("anthropic", api_key="k") as entered:
        inside = entered.http_client()
    assert inside.is_closed


def test_cancel_is_synchronous() -> None:
    adapter = build_adapter("anthropic", api_key="k")
    router = Router(["anthropic:claude-sonnet-4-5"], adapters={"anthropic": adapter})
    for holder in (adapter, router):
        assert not inspect.iscoroutinefunction(holder.cancel)
        assert holder.cancel("req_unknown") is False
