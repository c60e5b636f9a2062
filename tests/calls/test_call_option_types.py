"""Options of a one-line call of a type they cannot be: each a classified error naming what
is wrong (an InvalidRequestError before anything is sent), never a bare TypeError or
ValueError from inside; ``None`` for an option is the option not given, as for ``system``."""

from __future__ import annotations

from typing import Any

import pytest

import metis
from metis.errors import ConfigError, InvalidRequestError
from metis.routing.limits import Limits
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


class Opaque:
    """A value JSON has no form of."""


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"stop_sequences": 5}, "stop_sequences: Input should be a valid list (got 5)"),
        ({"settings": "eu-west-1"}, "settings: expected a mapping of the provider's settings"),
        ({"settings": ["region"]}, "settings: expected a mapping of the provider's settings"),
        (
            {"provider_options": {"anthropic": {"metadata": Opaque()}}},
            "the request's body has a value JSON cannot hold",
        ),
        (
            {"provider_options": {"anthropic": {"metadata": {"a": {1, 2}}}}},
            "the request's body has a value JSON cannot hold",
        ),
    ],
)
def test_an_option_of_a_type_it_cannot_be_is_an_invalid_request(
    at_emulator: Emulator, options: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        metis.complete(MODEL, "Hi", max_retries=0, **options)
    assert said in str(caught.value)
    assert at_emulator.stats.requests == 0


def test_stop_sequences_none_is_none_given(at_emulator: Emulator) -> None:
    none: dict[str, Any] = {"stop_sequences": None}
    assert metis.complete(MODEL, "Hi", **none).text == "You said: Hi"


EMBEDDER = "openai:text-embedding-3-small"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"settings": "eu-west-1"}, "settings: expected a mapping of the provider's settings"),
        ({"concurrency": "4"}, "concurrency: expected a whole number >= 1, got '4'"),
        ({"concurrency": 0}, "concurrency: expected a whole number >= 1, got 0"),
        ({"truncate": "yes"}, "truncate: expected True or False, got 'yes'"),
    ],
)
def test_an_embed_option_of_a_type_it_cannot_be_is_an_invalid_request(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], said: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", emulator.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with pytest.raises(InvalidRequestError) as caught:
        metis.embed(EMBEDDER, "Hi", max_retries=0, **options)
    assert said in str(caught.value)
    assert emulator.stats.requests == 0
    assert len(metis.embed(EMBEDDER, ["Hi", "there"], concurrency=1).vectors) == 2


@pytest.mark.parametrize("model", [None, 5, b"anthropic:claude-sonnet-4-5"])
def test_a_model_that_is_not_a_string_or_a_router_is_a_config_error(model: Any) -> None:
    for call in (metis.complete, metis.count_tokens, metis.embed):
        with pytest.raises(ConfigError, match="expected a model as 'provider:model'"):
            call(model, "Hi")


WRONG_NUMBERS = [
    ("max_retries", "3", "max_retries: expected a whole number of retries >= 0, got str '3'"),
    ("max_retries", True, "max_retries: expected a whole number of retries >= 0, got bool True"),
    ("max_retries", 2.0, "max_retries: expected a whole number of retries >= 0, got float"),
    ("max_output_tokens", True, "max_output_tokens: expected a whole number of tokens >= 1"),
    ("max_output_tokens", "100", "max_output_tokens: expected a whole number of tokens >= 1"),
    ("temperature", True, "temperature: expected a number >= 0, got bool True"),
    ("temperature", "0.5", "temperature: expected a number >= 0, got str '0.5'"),
    ("top_p", False, "top_p: expected a number from 0 to 1, got bool False"),
    ("top_k", True, "top_k: expected a whole number >= 1, got bool True"),
    ("seed", "7", "seed: expected a whole number, got str '7'"),
    ("frequency_penalty", True, "frequency_penalty: expected a number, got bool True"),
    ("timeout_seconds", True, "timeout_seconds: expected a number of seconds > 0, got bool"),
    ("timeout_seconds", "30", "timeout_seconds: expected a number of seconds > 0, got str"),
]


@pytest.mark.parametrize(("name", "value", "said"), WRONG_NUMBERS)
def test_a_numeric_option_of_another_type_is_an_invalid_request_before_sending(
    at_emulator: Emulator, name: str, value: Any, said: str
) -> None:
    """``True`` is the int 1 to Python and ``"3"`` is 3 to pydantic's lax mode: neither is
    taken for a number, in a call, a streamed call, a session or a session's turn."""
    given = {name: value}
    calls = [
        lambda: metis.complete(MODEL, "Hi", **given),
        lambda: list(metis.stream(MODEL, "Hi", **given)),
        lambda: metis.count_tokens(MODEL, "Hi", **given),
        lambda: metis.Session(MODEL, **given),
        lambda: metis.Session(MODEL).send("Hi", **given),
    ]
    for call in calls:
        with pytest.raises(InvalidRequestError) as caught:
            call()
        assert said in str(caught.value)
    assert at_emulator.stats.requests == 0
    assert metis.complete(MODEL, "Hi", temperature=1, max_retries=0).text == "You said: Hi"


@pytest.mark.parametrize("value", ["3", True, 2.0, -1])
def test_max_retries_of_another_type_is_refused_by_embed_adapter_config_and_router(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, value: Any
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", emulator.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with pytest.raises(InvalidRequestError, match="max_retries"):
        metis.embed(EMBEDDER, "Hi", max_retries=value)
    with pytest.raises(ValueError, match="max_retries"):
        metis.AdapterConfig(max_retries=value)
    with pytest.raises(ConfigError, match="max_retries is a whole number of retries >= 0"):
        metis.Router(["openai:gpt-4o"], max_retries=value)
    target = metis.RouteTarget("openai:gpt-4o", max_retries=value)
    with pytest.raises(ConfigError, match="openai:gpt-4o: max_retries is a whole number"):
        metis.Router([target])
    assert emulator.stats.requests == 0


@pytest.mark.parametrize(("field", "value"), [("timeout_seconds", True), ("timeout_seconds", "9")])
def test_adapter_config_takes_no_bool_or_string_for_its_timeout(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        metis.AdapterConfig(**{field: value})
    assert metis.AdapterConfig(timeout_seconds=5).timeout_seconds == 5.0


@pytest.mark.parametrize(
    "build",
    [
        lambda: Limits(max_concurrent=True),
        lambda: Limits(requests_per_minute="5"),
        lambda: Limits(tokens_per_minute=True),
        lambda: metis.ThinkingConfig(budget_tokens=True),
        lambda: metis.ThinkingConfig(budget_tokens="8000"),
    ],
)
def test_limits_and_a_thinking_budget_take_no_bool_or_string(build: Any) -> None:
    pattern = r"Input should be a valid (integer|number)|Limits: \w+: expected a (whole )?number"
    with pytest.raises(ValueError, match=pattern):
        build()
