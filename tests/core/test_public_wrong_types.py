"""Public constructors and functions of ``metis`` given an argument of a type they cannot
use: a ConfigError naming the argument and what would do, never a bare AttributeError or
TypeError from inside (found by calling each public callable with each wrong type)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import metis
from metis.errors import ConfigError
from metis.model.response import TokenUsage

MODEL = "anthropic:claude-sonnet-4-5"
WRONG = [None, 5, "x", b"x", True, object(), ["x"], {"a": 1}, 1.5]


def stack() -> Any:
    from metis.pipeline import load_stack

    return load_stack("anthropic")


def built() -> Any:
    return metis.build_adapter("anthropic", api_key="k")


CALLS: dict[str, tuple[Callable[[Any], object], str]] = {
    "Adapter(stack)": (lambda v: metis.Adapter(v), "Adapter(stack): expected a StackSpec"),
    "Adapter(config)": (lambda v: metis.Adapter(stack(), v), "Adapter(config): expected an"),
    "Adapter.wire_model(model)": (
        lambda v: built().wire_model(v),
        "Adapter.wire_model(model): expected a str",
    ),
    "Adapter.capabilities_for(wire_model)": (
        lambda v: built().capabilities_for(v),
        "Adapter.capabilities_for(wire_model): expected a str",
    ),
    "Adapter.cancel(request_id)": (
        lambda v: built().cancel(v),
        "Adapter.cancel(request_id): expected a str",
    ),
    "Batches(adapter)": (lambda v: metis.Batches(v), "Batches(adapter): expected a chat adapter"),
    "CachedContents(adapter)": (
        lambda v: metis.CachedContents(v),
        "CachedContents(adapter): expected a chat adapter",
    ),
    "Registry(spec)": (lambda v: metis.Registry(v), "Registry(spec): expected a RegistryFile"),
    "Router(targets)": (lambda v: metis.Router(v), "route"),
    "Router(fallback_on)": (
        lambda v: metis.Router([MODEL], fallback_on=v),
        "fallback_on",
    ),
    "Router(adapters)": (lambda v: metis.Router([MODEL], adapters=v), "Router(adapters)"),
    "Router(limits)": (lambda v: metis.Router([MODEL], limits=v), "Router(limits)"),
    "Router(shared_state_timeout)": (
        lambda v: metis.Router([MODEL], shared_state_timeout=v),
        "Router(shared_state_timeout): expected a number of seconds > 0",
    ),
    "cost_of(model)": (lambda v: metis.cost_of(v, TokenUsage()), "cost_of(model): expected a str"),
    "cost_of(usage)": (lambda v: metis.cost_of(MODEL, v), "usage: expected a TokenUsage"),
    "cost_of(table)": (
        lambda v: metis.cost_of(MODEL, TokenUsage(), v),
        "cost_of(table): expected a PriceTable",
    ),
    "tool(function)": (lambda v: metis.tool(v), "a tool is made of a function"),
}
ACCEPTED = {  # what each takes of WRONG as its own (None: its default)
    "Adapter(config)": (None,),
    "Router(fallback_on)": (["x"],),  # a list, of an unknown class: refused by name below
    "Router(adapters)": (None, {"a": 1}),
    "Router(limits)": (None,),
    "Router(shared_state_timeout)": (5, 1.5),
    "Adapter.wire_model(model)": ("x",),
    "Adapter.capabilities_for(wire_model)": ("x",),
    "Adapter.cancel(request_id)": ("x",),
    "cost_of(model)": ("x",),  # a model with no price: an unpriced Cost
    "cost_of(table)": (None,),
    "tool(function)": (None,),  # @metis.tool(name=...): the decorator
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("value", WRONG, ids=lambda v: type(v).__name__)
def test_a_wrong_type_is_a_config_error_naming_the_argument(name: str, value: Any) -> None:
    call, said = CALLS[name]
    if any(value is taken or value == taken for taken in ACCEPTED.get(name, ())):
        return
    with pytest.raises(ConfigError) as caught:
        call(value)
    assert said in str(caught.value) or not said


def test_router_limits_are_limits_or_their_fields() -> None:
    with pytest.raises(ConfigError, match="rpm: unknown key; expected one of: max_concurrent"):
        metis.Router([MODEL], limits={MODEL: {"rpm": 5}})
    router = metis.Router([MODEL], limits={MODEL: {"max_concurrent": 2}})
    assert router.targets[0].limiter is not None


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf")])
def test_a_shared_state_timeout_is_a_finite_number_of_seconds_above_zero(seconds: float) -> None:
    with pytest.raises(ConfigError, match=r"Router\(shared_state_timeout\): expected a number"):
        metis.Router([MODEL], shared_state_timeout=seconds)
    assert metis.Router([MODEL], shared_state_timeout=2).shared_state_timeout == 2.0


def test_an_output_type_that_is_a_schema_says_where_a_schema_goes(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    schema: Any = {"type": "object"}
    with pytest.raises(ConfigError, match="output_type is a type; a JSON schema"):
        metis.complete(MODEL, "Hi", output_type=schema)
    assert emulator.stats.requests == 0


@pytest.mark.parametrize("value", WRONG, ids=lambda v: type(v).__name__)
def test_an_adapter_given_what_is_not_a_request_says_so_before_sending(
    emulator: Any, value: Any
) -> None:
    import asyncio

    from metis.errors import InvalidRequestError

    adapter = metis.build_adapter("anthropic", api_key="k", base_url=emulator.url)

    async def main() -> None:
        try:
            for call in (adapter.complete, adapter.count_tokens):
                with pytest.raises(InvalidRequestError, match="expected a CanonicalRequest"):
                    await call(value)
            with pytest.raises(InvalidRequestError, match="expected a CanonicalRequest"):
                async for _ in adapter.stream(value):
                    pass
        finally:
            await adapter.aclose()

    asyncio.run(main())
    assert emulator.stats.requests == 0
    if value is not None:
        with pytest.raises(ConfigError, match="config: expected an AdapterConfig"):
            metis.build_adapter("anthropic", api_key="k", config=value)


@pytest.mark.parametrize("output_type", [["x"], {"type": "object"}, 5])
def test_an_output_type_that_is_no_type_is_a_config_error(output_type: Any) -> None:
    session = metis.Session(MODEL)
    with pytest.raises(ConfigError, match="output_type"):
        session.run("Hi", output_type=output_type)
