"""A gateway key's limits as the official SDKs meet them: over its requests per minute, a 429
with ``retry-after`` (the wait until the minute frees a request, which both SDKs wait rather
than their own half-second backoff) and the limit in the API's own rate-limit headers, as the
provider says its own; a spent budget, a 429 neither SDK retries, with no rate limit said."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway.test_gateway_sdk_resilience import retrying
from tests.gateway_fixture import gateway_url

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
SAID: Any = [{"role": "user", "content": "Hi"}]
DROPPED = "metis.gateway.dropped"
KEYS = [
    {"name": "paced", "sha256": digest("paced-key"), "requests_per_minute": 1},
    {"name": "poor", "sha256": digest("poor-key"), "budget_usd": 0.000001},
    {"name": "team-a", "sha256": digest("team-key")},
]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with gateway_url(Emulator(), keys=KEYS) as served:
        yield served


def test_a_keys_rate_is_said_as_each_apis_rate_limit_and_waited(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    oai = openai.OpenAI(api_key="paced-key", base_url=url + "/v1", max_retries=0)
    oai.chat.completions.create(model="flash", messages=SAID)
    with pytest.raises(openai.RateLimitError) as over:
        oai.chat.completions.create(model="flash", messages=SAID)
    said = over.value.response.headers
    assert said["x-ratelimit-limit-requests"] == "1"
    assert said["x-ratelimit-remaining-requests"] == "0"
    wait = int(said["retry-after"])
    assert 1 <= wait <= 60 and said["x-ratelimit-reset-requests"] == f"{wait}s"
    assert said["x-should-retry"] == "true"
    claude = anthropic.Anthropic(api_key="paced-key", base_url=url, max_retries=1)
    waits = retrying(claude, monkeypatch)
    with pytest.raises(anthropic.RateLimitError) as again:
        claude.messages.create(model="gpt", max_tokens=20, messages=SAID)
    assert len(waits) == 1 and 1 <= waits[0] <= 60  # the gateway's wait, not its own backoff
    said = again.value.response.headers
    assert said["anthropic-ratelimit-requests-limit"] == "1"
    assert said["anthropic-ratelimit-requests-remaining"] == "0"
    reset = datetime.fromisoformat(said["anthropic-ratelimit-requests-reset"])
    assert reset.tzinfo is not None and reset > datetime.now(UTC)


def test_a_spent_budget_says_no_rate_limit_and_is_not_retried(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    oai = openai.OpenAI(api_key="poor-key", base_url=url + "/v1", max_retries=2)
    waits = retrying(oai, monkeypatch)
    oai.chat.completions.create(model="gpt", messages=SAID)
    with pytest.raises(openai.RateLimitError) as spent:
        oai.chat.completions.create(model="gpt", messages=SAID)
    assert waits == [] and spent.value.code == "insufficient_quota"
    assert "its budget of 0.000001 USD" in str(spent.value)  # not 0.000001's 1E-6
    assert not any(h.startswith("x-ratelimit") for h in spent.value.response.headers)


def test_a_log_line_of_a_keys_request_names_the_key(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What an operator reads of a request whose fields were left out says which key sent
    it, translated and passed through (the simple key's says none)."""
    oai = openai.OpenAI(api_key="team-key", base_url=url + "/v1", max_retries=0)
    with caplog.at_level(logging.WARNING, logger="metis.gateway"):
        oai.chat.completions.create(model="flash", messages=SAID, n=2)
        oai.chat.completions.create(model="gpt", messages=SAID, max_tokens=10_000_000)
    said = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == DROPPED]
    assert said == [
        "left out of the request for flash (key team-a): n",
        "left out of the request for gpt (key team-a): max_tokens lowered from 10000000 to 16384",
    ]


def _gauge(text: str, family: str, key: str) -> float | None:
    found = re.search(rf'^metis_gateway_{family}{{key="{key}"}} (\S+)$', text, re.M)
    return None if found is None else float(found[1])


def test_each_keys_spend_and_budget_are_scraped(url: str) -> None:
    """An operator who gave a key a budget reads what it has spent in ``/metrics`` (it was
    nowhere to be read): a gauge per key, and its budget beside it where it has one."""
    oai = openai.OpenAI(api_key="team-key", base_url=url + "/v1", max_retries=0)
    before = _gauge(httpx.get(url + "/metrics").text, "key_spent_usd", "team-a")
    oai.chat.completions.create(model="gpt", messages=SAID)
    text = httpx.get(url + "/metrics").text
    after = _gauge(text, "key_spent_usd", "team-a")
    assert before is not None and after is not None and after > before
    assert "# TYPE metis_gateway_key_spent_usd gauge" in text
    assert _gauge(text, "key_budget_usd", "poor") == 0.000001
    assert _gauge(text, "key_budget_usd", "team-a") is None  # no budget: none said


def test_a_keys_spend_in_redis_is_every_gateways(redis_url: str) -> None:
    """With ``redis_url``, the gauge is the shared spend: a second gateway over the same
    Redis, which served nothing, says what the first charged."""
    keys = [{"name": "shared", "sha256": digest("shared-key"), "budget_usd": 5}]
    with (
        gateway_url(Emulator(), keys=keys, redis_url=redis_url) as first,
        gateway_url(Emulator(), keys=keys, redis_url=redis_url) as second,
    ):
        oai = openai.OpenAI(api_key="shared-key", base_url=first + "/v1", max_retries=0)
        oai.chat.completions.create(model="gpt", messages=SAID)
        served = _gauge(httpx.get(first + "/metrics").text, "key_spent_usd", "shared")
        told = _gauge(httpx.get(second + "/metrics").text, "key_spent_usd", "shared")
    assert served is not None and served > 0 and told == served
