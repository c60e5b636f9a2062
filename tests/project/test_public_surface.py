"""The public surface (docs/contract.md §1): the names users import, one place each."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import metis
import metis.errors
import metis.pipeline
import metis.registry
import metis.registry.registry
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
    embedder = metis.build_embedder("openai", api_key="k")
    session = metis.Session("anthropic:claude-sonnet-4-5")
    redis_store = RedisToolIdStore("redis://localhost:1")
    return [adapter, router, registry, embedder, session, redis_store]


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


MOVED_FROM_METIS = {
    "Call",
    "Inner",
    "Pipeline",
    "RequestStage",
    "ResponseHead",
    "Stage",
    "StageServices",
    "WireRequest",
    "load_stack",
    "register_stage",
}
"""The extension names ``metis`` held before, kept there for one release."""
EXTENSION_NAMES = MOVED_FROM_METIS | {
    "AsyncRequestStage",
    "EventHook",
    "ProviderSettings",
    "Watch",
    "register_settings",
}
PUBLIC_PACKAGES = [
    "metis",
    "metis.pipeline",
    "metis.model",
    "metis.errors",
    "metis.adapter",
    "metis.registry",
    "metis.routing",
    "metis.telemetry",
    "metis.catalog",
    "metis.testing",
]


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_every_exported_name_resolves_and_none_is_private(name: str) -> None:
    """As httpx's test_exported_members: ``__all__`` is what ``from x import *`` gives."""
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no exported name is a deprecated one
        for exported_name in exported:
            assert not exported_name.startswith("_"), exported_name
            assert getattr(module, exported_name) is not None, exported_name


LAZY_PACKAGES = ["metis", "metis.pipeline", "metis.model", "metis.telemetry", "metis.catalog"]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_dir_of_a_lazy_package_shows_its_names_not_its_own_imports(name: str) -> None:
    """``dir(metis)`` is what a newcomer reads after ``import metis``: the public names (and
    the submodules imported so far), not ``Any``, ``importlib`` or ``TYPE_CHECKING``."""
    module = importlib.import_module(name)
    shown = {entry for entry in dir(module) if not entry.startswith("_")}
    assert set(module.__all__) <= shown
    extra = {
        entry
        for entry in shown - set(module.__all__)
        if getattr(getattr(module, entry), "__name__", None) != f"{name}.{entry}"
    }
    assert extra == set()


@pytest.mark.parametrize("name", ["metis", "metis.pipeline"])
def test_the_lazy_export_table_and_the_type_checkers_imports_agree(name: str) -> None:
    """A lazy package lists each name twice: in ``_EXPORTS`` (for run time) and under
    ``TYPE_CHECKING`` (for type checkers and editors), beside the subpackages a program reaches
    as attributes (``from metis import histories``)."""
    module = importlib.import_module(name)
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    typed = {
        alias.asname or alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module != name  # not its subpackages
        for alias in node.names
    }
    assert typed == module._EXPORTS
    for exported, where in module._EXPORTS.items():  # each from the module that defines it
        assert getattr(importlib.import_module(where), exported) is getattr(module, exported)


def test_metis_holds_the_user_names_and_metis_pipeline_the_extension_names() -> None:
    assert set(metis.pipeline.__all__) == EXTENSION_NAMES
    assert not EXTENSION_NAMES & set(metis.__all__)
    missing_before = {
        "DroppedContent",
        "TokenCount",
        "RouteTarget",
        "ModelRoute",
        "MultiSink",
        "NullSink",
        "TelemetryEvent",
        "CallStarted",
        "CallCompleted",
        "CallFailed",
        "ToolIdStoreFailed",
        "RouteDecided",
        "AvailabilityChanged",
    }
    assert missing_before <= set(metis.__all__)


@pytest.mark.usefixtures("fresh_deprecations")
def test_the_extension_names_stay_importable_from_metis_for_one_release() -> None:
    for name in sorted(MOVED_FROM_METIS):
        with pytest.warns(DeprecationWarning, match=rf"metis\.{name} .*metis\.pipeline\.{name}"):
            moved = getattr(metis, name)
        assert moved is getattr(metis.pipeline, name)
    with pytest.raises(AttributeError):
        metis.no_such_name  # noqa: B018


@pytest.mark.usefixtures("fresh_deprecations")
def test_the_registrys_route_is_a_model_route_and_route_a_deprecated_alias() -> None:
    from metis.registry import ModelRoute, Registry

    registry = Registry.from_dict(
        {"adapters": {"a": {"type": "anthropic"}}, "models": {"anthropic:x": {"adapter": "a"}}}
    )
    assert all(isinstance(route, ModelRoute) for route in registry.routes())
    for module in (metis, metis.registry, metis.registry.registry):
        with pytest.warns(DeprecationWarning, match=r"\.Route is deprecated.*ModelRoute"):
            assert module.Route is ModelRoute


def test_docs_names_lists_every_public_name_and_no_other() -> None:
    """docs/names.md is the index a newcomer reads: a name added to ``metis.__all__`` or
    ``metis.pipeline.__all__`` needs its row, and a row of a name that is gone is stale."""
    text = (Path(__file__).parents[2] / "docs" / "names.md").read_text(encoding="utf-8")
    top, _, extension = text.partition("\n## metis.pipeline")
    rows = re.compile(r"^\| `(\w+)` \|", re.MULTILINE)
    assert sorted(rows.findall(top)) == sorted(metis.__all__)
    assert sorted(rows.findall(extension)) == sorted(metis.pipeline.__all__)
