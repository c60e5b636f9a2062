"""Options of a one-line call of a type they cannot be: each a classified error naming what
is wrong (an InvalidRequestError before anything is sent), never a bare TypeError or
ValueError from inside; ``None`` for an option is the option not given, as for ``system``."""

from __future__ import annotations

from typing import Any

import pytest

import metis
from metis.errors import ConfigError, InvalidRequestError
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
