"""An unknown keyword option is a TypeError naming the nearest known one (metis/options.py):
the one-line calls, and every public constructor and factory that takes options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

import metis
from metis.adapter import Adapter, build_adapter
from metis.core.options import UnknownOptionError, nearest_option
from metis.pipeline.config import AdapterConfig
from metis.pipeline.stores import InMemoryToolIdStore
from metis.redis.availability import RedisAvailability
from metis.redis.limits import RedisBuckets, RedisSlots
from metis.redis.tool_ids import RedisToolIdStore
from metis.registry import Registry
from metis.routing import (
    CooldownPolicy,
    InMemoryAvailability,
    InMemoryBuckets,
    Limiter,
    Limits,
    Router,
)
from metis.stacks.loader import load_stack
from metis.telemetry import LoggingSink, OpenTelemetrySink
from metis.testing.emulator import Emulator
from metis.tools import Tool

MODEL = "anthropic:claude-sonnet-4-5"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def _sync_stream(**options: Any) -> None:
    list(metis.stream(MODEL, "Hi", **options))


def _async(call: Callable[..., Any]) -> Callable[..., None]:
    def run(**options: Any) -> None:
        anyio.run(lambda: call(**options))

    return run


async def _astream(**options: Any) -> None:
    async for _ in metis.astream(MODEL, "Hi", **options):
        pass


ONE_LINE_CALLS = {
    "complete": lambda **o: metis.complete(MODEL, "Hi", **o),
    "acomplete": _async(lambda **o: metis.acomplete(MODEL, "Hi", **o)),
    "stream": _sync_stream,
    "astream": _async(_astream),
    "count_tokens": lambda **o: metis.count_tokens(MODEL, "Hi", **o),
    "acount_tokens": _async(lambda **o: metis.acount_tokens(MODEL, "Hi", **o)),
}


@pytest.mark.parametrize("call", ONE_LINE_CALLS)
@pytest.mark.parametrize(
    ("option", "nearest"),
    [
        ("max_tokens", "max_output_tokens"),
        ("system_prompt", "system"),
        ("stop", "stop_sequences"),
        ("temprature", "temperature"),
        ("timeout", "timeout_seconds"),
    ],
)
def test_a_one_line_call_refuses_an_unknown_option_naming_the_nearest(
    at_emulator: Emulator, call: str, option: str, nearest: str
) -> None:
    with pytest.raises(UnknownOptionError) as caught:
        ONE_LINE_CALLS[call](**{option: 10})
    assert isinstance(caught.value, TypeError)
    assert str(caught.value) == (
        f"metis.{call}() got an unknown option {option!r}; did you mean {nearest!r}?"
    )
    assert caught.value.suggestion == nearest
    assert at_emulator.stats.requests == 0  # refused before anything was sent


@pytest.mark.parametrize("call", ONE_LINE_CALLS)
def test_an_option_metis_does_not_send_says_so_and_lists_the_options(
    at_emulator: Emulator, call: str
) -> None:
    with pytest.raises(
        TypeError, match=r"'logprobs'; metis does not send logprobs; its options are: "
    ):
        ONE_LINE_CALLS[call](logprobs=True)
    with pytest.raises(TypeError, match=r"'stream'; for a streamed call use metis\.stream"):
        ONE_LINE_CALLS[call](stream=True)
    assert at_emulator.stats.requests == 0


def test_the_sync_stream_refuses_when_called_not_when_iterated() -> None:
    with pytest.raises(UnknownOptionError, match="max_output_tokens"):
        metis.stream(MODEL, "Hi", max_tokens=10)  # type: ignore[call-arg]
    with pytest.raises(UnknownOptionError, match="max_output_tokens"):
        metis.astream(MODEL, "Hi", max_tokens=10)  # type: ignore[call-arg]


def test_the_known_options_still_reach_the_request(at_emulator: Emulator) -> None:
    metis.complete(MODEL, "Hi", max_output_tokens=10, system="Be brief.", temperature=0.5)
    body = at_emulator.requests[-1].json()
    assert body["max_tokens"] == 10 and body["temperature"] == 0.5
    assert "Be brief." in str(body["system"])


def _redis_client() -> Any:
    class Client:  # the constructors only register their scripts
        def register_script(self, script: str) -> object:
            return object()

    return Client()


def _stack() -> Any:
    return load_stack("anthropic")


CONSTRUCTORS: dict[str, tuple[Callable[..., object], str, str]] = {
    # name: (a call with the misspelt option, the option, the nearest)
    "build_adapter": (lambda **o: build_adapter("anthropic", **o), "timeout", "timeout_seconds"),
    "Adapter": (lambda **o: Adapter(_stack(), **o), "sink", "telemetry"),
    "AdapterConfig": (lambda **o: AdapterConfig(**o), "retries", "max_retries"),
    "Router": (lambda **o: Router(["anthropic:claude-sonnet-4-5"], **o), "fallback", "fallback_on"),
    "Registry": (
        lambda **o: Registry.from_dict({"adapters": {}, "models": {}}, **o),
        "telemetry_sink",
        "telemetry",
    ),
    "InMemoryToolIdStore": (lambda **o: InMemoryToolIdStore(**o), "max_session", "max_sessions"),
    "RedisToolIdStore": (lambda **o: RedisToolIdStore(**o), "ttl", "ttl_seconds"),
    "RedisToolIdStore.sentinel": (
        lambda **o: RedisToolIdStore.sentinel(["localhost:26379"], "main", **o),
        "prefix",
        "key_prefix",
    ),
    "RedisToolIdStore.cluster": (
        lambda **o: RedisToolIdStore.cluster(["localhost:7000"], **o),
        "max_conections",
        "max_connections",
    ),
    "InMemoryAvailability": (lambda **o: InMemoryAvailability(**o), "polcy", "policy"),
    "CooldownPolicy": (lambda **o: CooldownPolicy(**o), "max_second", "max_seconds"),
    "InMemoryBuckets": (lambda **o: InMemoryBuckets(**o), "clok", "clock"),
    "Limits": (lambda **o: Limits(**o), "max_concurrency", "max_concurrent"),
    "Limiter": (lambda **o: Limiter("m", Limits(), **o), "bucket", "buckets"),
    "RedisAvailability": (lambda **o: RedisAvailability(_redis_client(), **o), "prefx", "prefix"),
    "RedisBuckets": (lambda **o: RedisBuckets(_redis_client(), **o), "prefx", "prefix"),
    "RedisSlots": (lambda **o: RedisSlots(_redis_client(), **o), "prefx", "prefix"),
    "LoggingSink": (lambda **o: LoggingSink(**o), "levl", "level"),
    "OpenTelemetrySink": (lambda **o: OpenTelemetrySink(**o), "tracer", "tracer_name"),
    "tool": (lambda **o: metis.tool(**o), "desc", "description"),
    "Tool.from_function": (lambda **o: Tool.from_function(len, **o), "nmae", "name"),
    "Tool.from_model": (lambda **o: Tool.from_model(Limits, **o), "nmae", "name"),
    "Emulator": (lambda **o: Emulator(**o), "prot", "port"),
}


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_every_public_constructor_refuses_an_unknown_option_naming_the_nearest(
    name: str,
) -> None:
    make, option, nearest = CONSTRUCTORS[name]
    with pytest.raises(UnknownOptionError) as caught:
        make(**{option: 1})
    assert isinstance(caught.value, TypeError)
    assert f"got an unknown option {option!r}; did you mean {nearest!r}?" in str(caught.value)


def test_the_registry_refuses_an_unknown_adapter_option_when_made_not_at_the_first_call() -> None:
    with pytest.raises(UnknownOptionError, match=r"Registry\(\) got an unknown option 'sink'"):
        Registry.from_dict({"adapters": {}, "models": {}}, sink=None)
    with pytest.raises(UnknownOptionError, match="init_on_first_call"):  # the registry's own
        Registry.from_dict({"adapters": {}, "models": {}}, init_on_first_call=False)


def test_the_checked_constructors_keep_their_signatures_and_known_options() -> None:
    import inspect

    assert "fallback_on" in inspect.signature(Router).parameters
    assert "timeout_seconds" in inspect.signature(build_adapter).parameters
    assert AdapterConfig(timeout_seconds=5).timeout_seconds == 5
    assert AdapterConfig.model_validate({"timeout_seconds": 5}).timeout_seconds == 5
    assert InMemoryToolIdStore(max_sessions=3).max_sessions == 3
    assert CooldownPolicy(max_seconds=3).max_seconds == 3


def test_the_nearest_option_prefers_what_other_libraries_call_it() -> None:
    known = ["system", "max_output_tokens", "stop_sequences", "max_retries"]
    assert nearest_option("max_tokens", known) == "max_output_tokens"  # not max_retries
    assert nearest_option("system_prompt", known) == "system"
    assert nearest_option("stop_sequence", known) == "stop_sequences"
    assert nearest_option("frobnicate", known) is None


def test_a_subclass_of_a_checked_model_takes_its_own_fields_too() -> None:
    class TenantConfig(AdapterConfig):
        tenant: str = "acme"

    assert TenantConfig(tenant="other", timeout_seconds=5).tenant == "other"
    with pytest.raises(UnknownOptionError, match=r"TenantConfig\(\) got an unknown option 'tenat'"):
        TenantConfig(tenat="x")
