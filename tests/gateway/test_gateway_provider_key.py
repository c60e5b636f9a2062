"""The gateway's own provider credentials, missing or refused upstream: the gateway's fault,
in each API's error shape, never the 401 a client's SDK or agent reads as its own key being
wrong (docs/gateway.md, Errors)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from .conftest import anthropic, openai

pytestmark = pytest.mark.anyio
UPSTREAM_KEY = "sk-upstream"  # the key gateway_config gives every family
HI = [{"role": "user", "content": "Hi"}]
UNSET = {
    name: {"type": stack, "api_key_env": "METIS_TEST_NOT_SET", "max_retries": 0}
    for name, stack in (("anthropic", "anthropic"), ("openai", "openai"))
}


@pytest.fixture(scope="module")
def refused() -> Iterator[str]:
    """A gateway whose upstream takes another key than the gateway's own."""
    emulator = Emulator(api_keys=["sk-another-key"])
    with serving(create(gateway_config(emulator))) as (url, _):
        yield url


@pytest.fixture(scope="module")
def missing() -> Iterator[str]:
    """A gateway whose anthropic and openai adapters' key variable is not set."""
    routes = {"only_unset": {"models": ["sonnet", "gpt"]}}
    config = gateway_config(Emulator(), adapters=UNSET, routes=routes)
    with serving(create(config)) as (url, _):
        yield url


def create(config: Any) -> Any:
    from metis.gateway.app import create_app

    return create_app(config)


def _anthropic(url: str, key: str = GATEWAY_KEY) -> Any:
    return anthropic.Anthropic(api_key=key, base_url=url, max_retries=0)


def _openai(url: str, key: str = GATEWAY_KEY) -> Any:
    return openai.OpenAI(api_key=key, base_url=url + "/v1", max_retries=0)


def _no_key_in(error: Any) -> None:
    assert UPSTREAM_KEY not in error.response.text and "sk-up" not in error.response.text
    assert error.response.headers["x-should-retry"] == "false"


@pytest.mark.parametrize(("model", "stream"), [("sonnet", False), ("gpt", False), ("gpt", True)])
def test_a_refused_provider_key_is_a_502_to_the_anthropic_sdk(
    refused: str, model: str, stream: bool
) -> None:
    """Passed through (sonnet) or translated (gpt), streamed or not: the SDK raises its
    server error, not AuthenticationError, and is told not to retry."""
    with pytest.raises(anthropic.InternalServerError) as caught:
        _anthropic(refused).messages.create(model=model, max_tokens=9, messages=HI, stream=stream)
    error = caught.value
    assert not isinstance(error, anthropic.AuthenticationError)
    assert error.status_code == 502 and error.body["error"]["type"] == "api_error"
    assert "refused the gateway's own credentials" in error.body["error"]["message"]
    assert "your key for this gateway was accepted" in error.body["error"]["message"]
    _no_key_in(error)


@pytest.mark.parametrize("model", ["gpt", "sonnet"])
def test_a_refused_provider_key_is_a_502_to_the_openai_sdk(refused: str, model: str) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        _openai(refused).chat.completions.create(model=model, messages=HI)  # type: ignore[arg-type]
    error = caught.value
    assert not isinstance(error, openai.AuthenticationError) and error.status_code == 502
    assert error.code == "provider_key_refused" and error.type == "server_error"
    _no_key_in(error)
    with pytest.raises(openai.InternalServerError) as responded:
        _openai(refused).responses.create(model=model, input="Hi")
    assert responded.value.status_code == 502 and responded.value.code == "provider_key_refused"


def test_a_missing_provider_key_is_a_500_naming_the_cause(
    missing: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("ERROR", logger="metis.gateway"):
        with pytest.raises(anthropic.InternalServerError) as caught:
            _anthropic(missing).messages.create(model="sonnet", max_tokens=9, messages=HI)
        with pytest.raises(openai.InternalServerError) as chat:
            _openai(missing).chat.completions.create(model="gpt", messages=HI)  # type: ignore[arg-type]
    assert caught.value.status_code == 500 and caught.value.body["error"]["type"] == "api_error"
    assert "has no credentials configured" in caught.value.body["error"]["message"]
    assert "METIS_TEST_NOT_SET" not in caught.value.response.text
    assert chat.value.status_code == 500 and chat.value.code == "provider_key_missing"
    logged = [r for r in caplog.records if getattr(r, "event", "") == "metis.gateway.provider_key"]
    assert logged and all("METIS_TEST_NOT_SET" in r.getMessage() for r in logged)


def test_a_wrong_gateway_key_is_still_the_callers_401(refused: str) -> None:
    with pytest.raises(anthropic.AuthenticationError):
        _anthropic(refused, "wrong").messages.create(model="sonnet", max_tokens=9, messages=HI)
    with pytest.raises(openai.AuthenticationError):
        _openai(refused, "wrong").chat.completions.create(model="gpt", messages=HI)  # type: ignore[arg-type]


def test_a_refused_provider_key_counting_tokens_is_a_502_too(refused: str) -> None:
    """Passed through to Anthropic's own count_tokens (another model's count falls back to
    the estimate)."""
    with pytest.raises(anthropic.InternalServerError) as caught:
        _anthropic(refused).messages.count_tokens(model="sonnet", messages=HI)
    assert caught.value.status_code == 502
    _no_key_in(caught.value)


def test_a_route_none_of_whose_models_has_its_key_says_so(missing: str) -> None:
    """Not the last model's provider alone: the route's every model lacks its key."""
    with pytest.raises(openai.InternalServerError) as caught:
        _openai(missing).chat.completions.create(model="only_unset", messages=HI)  # type: ignore[arg-type]
    assert caught.value.status_code == 500 and caught.value.code == "provider_key_missing"
    assert "no credentials configured for any model of this route" in caught.value.message


def _errors_by_class(url: str) -> dict[str, int]:
    """``metis_gateway_errors_total`` and ``failed_attempts_total`` summed by error class."""
    counts: dict[str, int] = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(("metis_gateway_errors_total{", "metis_gateway_failed_attempts_total{")):
            kind = line.split('error_class="')[1].split('"')[0]
            family = line.split("{")[0].removeprefix("metis_gateway_")
            counts[f"{family}:{kind}"] = counts.get(f"{family}:{kind}", 0) + int(line.split()[-1])
    return counts


def test_metrics_count_the_gateways_own_key_apart_from_the_callers() -> None:
    """A refused or missing provider key is counted in its own class, on both paths, streamed
    or not and in a route's failed attempts; only a wrong gateway key is ``auth``."""
    routes = {"both": {"models": ["sonnet", "gpt"], "fallback_on": ["auth"]}}
    config = gateway_config(Emulator(api_keys=["sk-another-key"]), routes=routes)
    with serving(create(config)) as (url, _):
        for model, stream in (("sonnet", False), ("gpt", False), ("gpt", True), ("both", False)):
            with pytest.raises(anthropic.InternalServerError):
                _anthropic(url).messages.create(
                    model=model, max_tokens=9, messages=HI, stream=stream
                )
        with pytest.raises(anthropic.AuthenticationError):
            _anthropic(url, "wrong").messages.create(model="sonnet", max_tokens=9, messages=HI)
        refused = _errors_by_class(url)
    assert refused == {
        "errors_total:provider_key_refused": 4,
        "failed_attempts_total:provider_key_refused": 2,
        "errors_total:auth": 1,
    }
    with serving(create(gateway_config(Emulator(), adapters=UNSET))) as (url, _):
        with pytest.raises(openai.InternalServerError):
            _openai(url).chat.completions.create(model="gpt", messages=HI)  # type: ignore[arg-type]
        assert _errors_by_class(url) == {"errors_total:provider_key_missing": 1}


def test_a_route_names_a_refused_provider_key_as_the_gateways_fault() -> None:
    """A route whose every model failed names each one's class: the gateway's own key
    refused upstream is not the caller's ``auth``."""
    emulator = Emulator()
    routes = {"both": {"models": ["gpt", "flash"], "fallback_on": ["auth", "rate_limit"]}}
    with serving(create(gateway_config(emulator, routes=routes))) as (url, _):
        emulator.push_fault("auth", provider="openai")
        emulator.push_fault("rate_limit", provider="gemini")
        with pytest.raises(openai.RateLimitError) as caught:
            _openai(url).chat.completions.create(model="both", messages=HI)  # type: ignore[arg-type]
    said = caught.value.message
    assert "openai:gpt-4o (provider_key_refused)" in said and "(auth)" not in said, said
