"""What a provider says about retrying: Retry-After (seconds, milliseconds, an HTTP date),
Google's ``retryDelay`` and ``x-should-retry``, read by every codec's error classification,
and what the retry stage does with them."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from metis.errors import ErrorClass
from metis.testing.emulator import Emulator
from metis.wire.embeddings.google import google_error
from metis.wire.http_errors import http_error, retry_after_seconds

from ..conftest import Waits
from ..stack_table import MODELS, adapter

pytestmark = pytest.mark.backend_independent

NOT_A_DELAY = ["-5", "nan", "NaN", "inf", "-inf", "Infinity", "garbage", ""]


@pytest.mark.parametrize("value", NOT_A_DELAY)
def test_a_retry_after_that_is_not_a_delay_is_no_hint(value: str) -> None:
    assert retry_after_seconds({"retry-after": value}) is None
    assert retry_after_seconds({"retry-after-ms": value}) is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"Retry-After": "0"}, 0.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "nan", "retry-after": "3"}, 3.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: now
        ({"retry-after": "1e12"}, 1e12),  # as sent: the retry stage caps its wait
    ],
)
def test_a_retry_after_that_is_a_delay_is_read(headers: dict[str, str], seconds: float):
    assert retry_after_seconds(headers) == seconds


@pytest.mark.parametrize(
    "form",
    ["%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"],
    ids=["IMF-fixdate", "rfc850", "asctime"],
)
@pytest.mark.parametrize("zone", ["UTC0", "PST8PDT", "JST-9"])
def test_an_http_date_is_gmt_in_every_form_and_local_zone(
    form: str, zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The asctime form carries no zone (RFC 9110 §5.6.7: every HTTP date is GMT): it was
    # read as local time, so 5 s became 8 h and 5 s in California and no wait at all in Tokyo.
    now = 1_800_000_000.0
    value = time.strftime(form, time.gmtime(now + 5))
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        assert retry_after_seconds({"retry-after": value}, now) == 5.0
        zoneless = time.strftime("%a, %d %b %Y %H:%M:%S -0000", time.gmtime(now + 5))
        assert retry_after_seconds({"retry-after": zoneless}, now) == 5.0
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    ("value", "retryable"), [("true", True), ("True", True), ("false", False), ("maybe", None)]
)
@pytest.mark.parametrize("status", [400, 409, 429, 500, 529])
def test_x_should_retry_decides_over_the_status(
    status: int, value: str, retryable: bool | None
) -> None:
    error = http_error(status, {"X-Should-Retry": value}, "boom")
    plain = http_error(status, {}, "boom")
    assert error.error_class == plain.error_class
    assert error.retryable == (plain.retryable if retryable is None else retryable)


@pytest.mark.parametrize("delay", ["nans", "-5s", "infs"])
def test_a_google_retry_delay_that_is_not_a_delay_is_no_hint(delay: str) -> None:
    info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
    error_body = {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}
    body = json.dumps({"error": {**error_body, "details": [info]}})
    error = google_error(429, {"retry-after": "4"}, body.encode())
    assert error.error_class is ErrorClass.RATE_LIMIT
    assert error.retry_after_seconds == 4.0


def _answering(
    status: int, headers: dict[str, str], sent: list[int], kind: str
) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        body = {"type": "error", "error": {"type": kind, "message": "boom"}}
        return httpx.Response(status, headers=headers, json=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def _sends(status: int, headers: dict[str, str], kind: str = "rate_limit_error") -> int:
    from metis.errors import AdapterError
    from metis.model import CanonicalRequest, Message

    sent: list[int] = []
    request = CanonicalRequest(
        model=MODELS["anthropic"].split(":", 1)[1],
        messages=[Message.user("hi")],
        max_output_tokens=10,
    )
    async with _answering(status, headers, sent, kind) as client:
        built = adapter("anthropic", Emulator(), http_client=client, max_retries=2)
        try:
            with pytest.raises(AdapterError):
                await built.complete(request)
        finally:
            await built.aclose()
    return len(sent)


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["-5", "nan", "inf"])
async def test_a_retry_after_that_is_not_a_delay_leaves_the_backoff(
    value: str, no_backoff: Waits
) -> None:
    # Read as 0 s, these made every retry at once, hammering a server that asked for a pause.
    assert await _sends(429, {"retry-after": value}) == 3
    assert len(no_backoff) == 2 and all(wait >= 1.0 for wait in no_backoff)


@pytest.mark.anyio
async def test_x_should_retry_is_obeyed_by_the_retry_stage(no_backoff: Waits) -> None:
    assert await _sends(429, {"x-should-retry": "false"}) == 1
    assert await _sends(400, {"x-should-retry": "true"}, "invalid_request_error") == 3
    assert await _sends(400, {}, "invalid_request_error") == 1
