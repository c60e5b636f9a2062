"""The statuses a provider's own SDK retries: OpenAI's and Anthropic's (their ``_should_retry``)
retry 408, 409 (a lock timeout), 429 and every 5xx whatever the body's error type says, and
metis retries them too, raising the status's class when the retries run out; Gemini's and
Bedrock's SDKs do not retry a 409 (ALREADY_EXISTS, ConflictException), nor does metis."""

from __future__ import annotations

import json

import httpx
import pytest

from metis.errors import AdapterError, ErrorClass
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator

from ..conftest import Waits
from ..stack_table import MODELS, adapter

INVALID = {
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "lock"}},
    "openai": {"error": {"type": "invalid_request_error", "message": "lock", "code": None}},
    "openai_responses": {"error": {"type": "invalid_request_error", "message": "lock"}},
    "gemini": {"error": {"code": 409, "message": "exists", "status": "ALREADY_EXISTS"}},
    "bedrock": {"message": "conflict"},
}
HEADERS = {"bedrock": {"x-amzn-ErrorType": "ConflictException"}}


async def _failure(stack: str, status: int, headers: dict[str, str]) -> tuple[int, AdapterError]:
    """How many requests ``stack`` sent to a server answering ``status`` every time, and the
    error it raised."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        body = json.dumps(INVALID[stack]).encode()
        return httpx.Response(status, headers={**HEADERS.get(stack, {}), **headers}, content=body)

    request = CanonicalRequest(
        model=MODELS[stack].split(":", 1)[1], messages=[Message.user("hi")], max_output_tokens=9
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        built = adapter(stack, Emulator(), http_client=client, max_retries=2)
        try:
            with pytest.raises(AdapterError) as caught:
                await built.complete(request)
        finally:
            await built.aclose()
    return len(sent), caught.value


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["anthropic", "openai", "openai_responses"])
@pytest.mark.parametrize(
    ("status", "raised"),
    [
        (408, ErrorClass.NETWORK),
        (409, ErrorClass.SERVER_ERROR),
        (429, ErrorClass.RATE_LIMIT),
        (500, ErrorClass.SERVER_ERROR),
    ],
)
async def test_a_status_the_sdk_retries_is_retried_whatever_the_body_type(
    stack: str, status: int, raised: ErrorClass, no_backoff: Waits
) -> None:
    sent, error = await _failure(stack, status, {})
    assert sent == 3
    assert error.error_class is raised and error.provider_status == status
    assert error.provider_message == "lock"


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["anthropic", "openai", "openai_responses"])
async def test_x_should_retry_false_still_stops_a_409(stack: str, no_backoff: Waits) -> None:
    sent, error = await _failure(stack, 409, {"x-should-retry": "false"})
    assert sent == 1 and not error.retryable


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["gemini", "bedrock"])
async def test_a_409_is_not_retried_where_the_provider_sdk_does_not(
    stack: str, no_backoff: Waits
) -> None:
    sent, error = await _failure(stack, 409, {})
    assert sent == 1
    assert error.error_class is ErrorClass.INVALID_REQUEST and not error.retryable
