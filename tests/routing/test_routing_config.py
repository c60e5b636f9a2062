"""Routes in models.yaml: ``routes:`` over the file's models, validated when it loads."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from metis.errors import ConfigError, ErrorClass, InvalidRequestError
from metis.registry import Registry
from metis.routing import Limits
from metis.testing.emulator import Emulator

from ..routing_helpers import ask

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # wire formats; sockets: test_transport and others


def registry_file(emulator_url: str, **route: Any) -> dict[str, Any]:
    return {
        "adapters": {
            "claude": {"type": "anthropic", "api_key": "k", "base_url": emulator_url},
            "gpt": {"type": "openai", "api_key": "k", "base_url": emulator_url},
        },
        "models": {
            "anthropic:claude-sonnet-4-5": {"adapter": "claude", "aliases": ["sonnet"]},
            "openai:gpt-4o": {"adapter": "gpt", "aliases": ["4o"]},
        },
        "routes": {
            "default": {
                "models": [
                    "sonnet",
                    {"model": "4o", "max_retries": 0, "options": {"temperature": 0}},
                ],
                **route,
            }
        },
    }


@pytest.mark.anyio
async def test_a_route_from_models_yaml_falls_back(emulator: Emulator) -> None:
    spec = registry_file(emulator.url, max_retries=1, limits={"openai": {"max_concurrent": 4}})
    async with Registry.from_dict(spec) as registry:
        route = registry.router("default")
        assert [t.model for t in route.targets] == ["anthropic:claude-sonnet-4-5", "openai:gpt-4o"]
        assert route.targets[0].max_retries == 1  # the call's, not the adapter's (2)
        assert route.targets[0].adapter.config.max_retries == 2
        assert route.targets[1].limiter is not None
        assert route.targets[1].limiter.limits == Limits(max_concurrent=4)
        emulator.push_fault("overloaded", times=2, provider="anthropic")
        with anyio.fail_after(20):
            response = await route.complete(ask())
    assert response.provider == "openai"
    assert [r.provider for r in emulator.requests] == ["anthropic", "anthropic", "openai"]
    assert emulator.requests[-1].json()["temperature"] == 0


def test_fallback_classes_are_configuration() -> None:
    spec = registry_file("http://127.0.0.1:1", fallback_on=["overloaded", "auth"])
    route = Registry.from_dict(spec).router("default")
    assert route.fallback_on == {ErrorClass.OVERLOADED, ErrorClass.AUTH}


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ({"models": ["opus"]}, "names model 'opus'"),
        ({"models": []}, "models"),
        ({"models": ["sonnet"], "fallback_on": ["sometimes"]}, "fallback_on"),
        ({"models": [{"model": "sonnet", "options": {"tempature": 1}}]}, "tempature"),
        ({"models": ["sonnet"], "limits": {"claude": {"max_concurent": 1}}}, "max_concurent"),
    ],
)
def test_a_wrong_route_is_refused_when_the_file_loads(route: dict[str, Any], message: str) -> None:
    spec = registry_file("http://127.0.0.1:1")
    spec["routes"] = {"default": route}
    with pytest.raises(ConfigError, match=message):
        Registry.from_dict(spec)


def test_an_unknown_route_name_is_an_invalid_request() -> None:
    registry = Registry.from_dict(registry_file("http://127.0.0.1:1"))
    with pytest.raises(InvalidRequestError, match="route"):
        registry.router("fast")
    anyio.run(registry.aclose)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"max_concurrent": 0}, "max_concurrent: expected a number >= 1, got 0"),
        ({"tokens_per_minute": -5.0}, "tokens_per_minute"),
        ({"on_limit": "sometimes"}, "on_limit"),
    ],
)
def test_a_wrong_limit_built_in_code_is_a_config_error_naming_the_field(
    given: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=f"Limits: {says}"):
        Limits(**given)
