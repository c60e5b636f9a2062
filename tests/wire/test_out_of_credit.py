"""An account that cannot pay is one error everywhere (metis/wire/out_of_credit.py): a
``rate_limit`` never retried, whatever status and type each provider answers it with. The
bodies are each provider's own words, as their users have reported them or their SDKs type
them."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from metis.errors import ErrorClass, RateLimitError
from metis.wire.codec import Codec

pytestmark = pytest.mark.backend_independent

ANTHROPIC_LOW_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
    "to upgrade or purchase credits."
)
OPENAI_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
XAI_CREDITS = (
    "Your team 16f2151a-40f4-4a80-8ad0-cae00c27e8dd has either used all available credits or "
    "reached its monthly spending limit. To continue making API requests, please purchase "
    "more credits or raise your spending limit."
)


def anthropic(status: int, kind: str, message: str, code: str | None = None) -> bytes:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["details"] = {"error_code": code}
    return json.dumps({"type": "error", "error": error, "request_id": "req_1"}).encode()


def openai(message: str, code: Any, kind: str | None = None) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": kind or code, "param": None, "code": code}}
    ).encode()


def google(code: int, status: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()


CASES: list[tuple[str, int, dict[str, str], bytes]] = [
    ("anthropic", 400, {}, anthropic(400, "invalid_request_error", ANTHROPIC_LOW_CREDIT)),
    (
        "anthropic",
        402,
        {},
        anthropic(402, "billing_error", "There's an issue with your billing or payment."),
    ),
    (  # anthropic SDK 2.x: EnforcedSpendLimitReachedError, a RateLimitError by details
        "anthropic",
        429,
        {},
        anthropic(
            429,
            "rate_limit_error",
            "Your organization has crossed its monthly usage threshold.",
            "enforced_spend_limit_reached",
        ),
    ),
    (
        "anthropic",
        400,
        {},
        anthropic(
            400,
            "invalid_request_error",
            "You have reached your specified API usage limits. You will regain access on "
            "2026-12-01 at 00:00 UTC.",
        ),
    ),
    ("openai", 429, {}, openai(OPENAI_QUOTA, "insufficient_quota")),
    ("openai_responses", 429, {}, openai(OPENAI_QUOTA, "insufficient_quota")),
    ("azure", 429, {}, openai(OPENAI_QUOTA, "insufficient_quota")),
    (
        "gemini",
        429,
        {},
        google(
            429,
            "RESOURCE_EXHAUSTED",
            "Your prepayment credits are depleted. Please go to AI Studio at "
            "https://ai.studio/projects to manage your project and billing.",
        ),
    ),
    (
        "gemini",
        400,
        {},
        google(
            400,
            "FAILED_PRECONDITION",
            "User location is not supported for the API use without a billing account linked.",
        ),
    ),
    (
        "gemini",
        400,
        {},
        google(
            400,
            "FAILED_PRECONDITION",
            "Gemini API free tier is not available in your country. Please enable billing on "
            "your project in Google AI Studio.",
        ),
    ),
    (
        "bedrock",
        403,
        {"x-amzn-errortype": "AccessDeniedException:http://internal.amazon.com/coral/"},
        json.dumps(
            {
                "message": "Model access is denied due to INVALID_PAYMENT_INSTRUMENT:A valid "
                "payment instrument must be provided."
            }
        ).encode(),
    ),
    (
        "openrouter",
        402,
        {},
        json.dumps(
            {
                "error": {
                    "code": 402,
                    "message": "Insufficient credits. Add more using https://openrouter.ai/credits",
                }
            }
        ).encode(),
    ),
    ("deepseek", 402, {}, openai("Insufficient Balance", "invalid_request_error")),
    ("xai", 429, {}, json.dumps({"code": "resource-exhausted", "error": XAI_CREDITS}).encode()),
    ("xai", 403, {}, json.dumps({"code": "permission-denied", "error": XAI_CREDITS}).encode()),
    (  # no public wording found for Mistral's or Groq's: a 402 says it by its status
        "mistral",
        402,
        {},
        json.dumps({"object": "error", "message": "Payment required", "type": "billing"}).encode(),
    ),
    ("groq", 402, {}, openai("Payment required", None, "invalid_request_error")),
]


@cache
def codec(stack: str) -> Codec:
    from metis.stacks.loader import load_stack

    found: Codec = load_stack(stack).build_pipeline()["normalize"].codec  # type: ignore[attr-defined]
    return found


@pytest.mark.parametrize(
    ("stack", "status", "headers", "body"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_an_account_that_cannot_pay_is_a_rate_limit_never_retried(
    stack: str, status: int, headers: dict[str, str], body: bytes
) -> None:
    error = codec(stack).error_from_http(status, headers, body)
    assert isinstance(error, RateLimitError), (error.error_class, error.message)
    assert error.retryable is False
    assert error.provider_status == status


@pytest.mark.parametrize(
    ("stack", "body"),
    [
        (  # Gemini's free tier per minute: a wait mends it (its RetryInfo says how long)
            "gemini",
            google(429, "RESOURCE_EXHAUSTED", OPENAI_QUOTA.split(" For more")[0]),
        ),
        ("openai", openai("Rate limit reached for gpt-4o", "rate_limit_exceeded")),
        ("anthropic", anthropic(429, "rate_limit_error", "Number of request tokens has exceeded")),
    ],
)
def test_a_rate_limit_a_wait_mends_is_still_retried(stack: str, body: bytes) -> None:
    error = codec(stack).error_from_http(429, {}, body)
    assert error.error_class is ErrorClass.RATE_LIMIT and error.retryable is True


def test_a_server_that_says_retry_is_not_believed_for_an_account_that_cannot_pay() -> None:
    error = codec("openai").error_from_http(
        429, {"x-should-retry": "true"}, openai(OPENAI_QUOTA, "insufficient_quota")
    )
    assert error.retryable is False


def test_an_in_stream_error_of_an_account_that_cannot_pay() -> None:
    from metis.wire.anthropic.errors import stream_error

    error = stream_error(
        {"type": "error", "error": {"type": "billing_error", "message": "no credit"}}, "anthropic"
    )
    assert isinstance(error, RateLimitError) and error.retryable is False
