"""A model whose account cannot pay (metis/wire/out_of_credit.py) is tried once and the route
moves on: each provider's own out-of-credit answer from the emulator (Anthropic's 400, OpenAI's
429 ``insufficient_quota``, Gemini's 429), never retried, the model cooled down."""

from __future__ import annotations

import anyio
import pytest

from metis.routing import Router, RouteTarget
from metis.telemetry import AvailabilityChanged, ListSink
from metis.testing.emulator import Emulator

from ..routing_helpers import MODELS, ask, emulated

pytestmark = [pytest.mark.usefixtures("no_backoff"), pytest.mark.backend_independent]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("anthropic", "openai"),
        ("openai", "gemini"),
        ("openai_responses", "anthropic"),
        ("gemini", "anthropic"),
    ],
)
async def test_an_account_out_of_credit_fails_over_without_a_retry(
    emulator: Emulator, first: str, then: str
) -> None:
    sink = ListSink()
    adapters = emulated(emulator, http_client=emulator.client())
    route = Router(
        [RouteTarget(MODELS[first], max_retries=2), MODELS[then]],
        adapters=adapters,
        telemetry=sink,
    )
    emulator.push_fault("out_of_credit", times=3, provider=first)
    with anyio.fail_after(20):
        response = await route.complete(ask())
    assert response.model == MODELS[then]
    assert [r.provider for r in emulator.requests] == [first, then]  # one try
    (cooled,) = [e for e in sink.events if isinstance(e, AvailabilityChanged)]
    assert (cooled.key, cooled.new_state, cooled.reason) == (
        MODELS[first],
        "cooling_down",
        "rate_limit",
    )
    await route.aclose()
