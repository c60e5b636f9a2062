"""An account that cannot pay: a provider's refusal because the account is out of credit, past
a spend limit, or has no way to pay (docs/contract.md §4, "Out of credit").

Providers say it in many ways: Anthropic as a 400 ``invalid_request_error`` ("Your credit
balance is too low ..."), a 402 ``billing_error``, or a 429 whose ``details.error_code`` names a
spend limit; OpenAI (and servers copying it) as a 429 ``insufficient_quota``; Gemini as a 429
``RESOURCE_EXHAUSTED`` ("Your prepayment credits are depleted ...") or a 400
``FAILED_PRECONDITION`` for a project with no billing where the free tier is not offered;
Bedrock as a 403 ``AccessDeniedException`` naming ``INVALID_PAYMENT_INSTRUMENT``; xAI as a 429
or 403 saying its team "has either used all available credits or reached its monthly spending
limit"; OpenRouter and DeepSeek as a 402. All of them are read one way: a ``rate_limit`` that no
wait mends (``retryable`` False), so a call is not retried, and a route moves on to its next
model (``rate_limit`` is in the default ``fallback_on``), as for OpenAI's own.
"""

from __future__ import annotations

import functools
import re

PAYMENT_REQUIRED = 402

CODES = frozenset(
    {
        "insufficient_quota",  # OpenAI, and the servers that copy its errors
        "billing_error",  # Anthropic's 402
        "payment_required",  # OpenRouter's name for its 402
        "insufficient_credits",
        "credit_balance_too_low",  # Anthropic's details.error_code of the 400 below
        "enforced_spend_limit_reached",  # Anthropic's details.error_code values
        "contract_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "linked_organization_billing_unavailable",
    }
)
"""Error codes and types that say the account cannot pay, whatever the status."""


@functools.cache
def _words() -> re.Pattern[str]:
    return re.compile(
        r"credit balance is too low"  # Anthropic
        r"|reached your specified API usage limits"  # Anthropic's own spend limit
        r"|insufficient (credits|balance|funds)"  # OpenRouter, DeepSeek, Anthropic's console
        r"|credits are depleted"  # Gemini's prepayment credits
        r"|used all available credits|monthly spending limit"  # xAI, Fireworks
        r"|run out of credits"
        r"|INVALID_PAYMENT_INSTRUMENT|valid payment instrument"  # Bedrock (AWS Marketplace)
        r"|without a billing account linked|enable billing",  # Gemini, no billing set up
        re.IGNORECASE,
    )


def cannot_pay(status: int | None, code: str | None, message: str) -> bool:
    """Whether an error (its HTTP status, None inside a stream; its code or type; its
    message) says the account cannot pay for the call. Quota words alone ("You exceeded your
    current quota") do not: Gemini says them of its free tier's per-minute limits too, which
    a wait does mend; OpenAI's are known by their code."""
    if status == PAYMENT_REQUIRED or (code is not None and code.lower() in CODES):
        return True
    return bool(message) and _words().search(message) is not None
