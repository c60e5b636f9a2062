"""A model whose account cannot pay (metis/wire/out_of_credit.py) is tried once and the route
moves on: each provider's own out-of-credit answer from the emulator (Anthropic's 400, OpenAI's
429 ``insufficient_quota``, Gemini's 429), never retried, the model cooled down; and every
provider's words of tests/wire/test_out_of_credit.py from a scripted peer."""

from __future__ import annotations

import anyio
import pytest

from metis.model import MessageComplete
from metis.routing import Router, RouteTarget
from metis.telemetry import AvailabilityChanged, ListSink
from metis.testing.emulator import Emulator

from ..fakes import FakePeer, Reply, request, sse
from ..routing_helpers import MODELS, ask, emulated
from ..wire.test_out_of_credit import CASES

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


def _chat_stream(text: str) -> Reply:
    """A Chat Completions stream saying ``text``, as an OpenAI-compatible server writes it."""
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    delta = {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}
    ended = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    used = {**chunk, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    events = [*sse(delta, ended, used, names=False), "data: [DONE]\n\n"]
    return Reply(chunks=events, headers={"content-type": "text/event-stream"})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "status", "headers", "body"),
    [case for case in CASES if case[0] != "azure"],  # azure: a deployment to name first
    ids=[f"{c[0]}-{c[1]}" for c in CASES if c[0] != "azure"],
)
async def test_every_providers_out_of_credit_answer_moves_a_route_on_after_one_try(
    stack: str, status: int, headers: dict[str, str], body: bytes
) -> None:
    """Each provider's own words for an account that cannot pay (tests/wire), answered by
    the route's first model (given two retries): it is asked once, and the next one answers."""
    refusing = FakePeer(
        Reply(status=status, chunks=[body], headers={"content-type": "application/json", **headers})
    )
    settings = {"settings": {"region": "us-east-1"}} if stack == "bedrock" else {}
    adapters = {
        stack: refusing.adapter(stack, **settings),
        "cerebras": FakePeer(_chat_stream("fine")).adapter("cerebras"),
    }
    route = Router([RouteTarget(f"{stack}:m", max_retries=2), "cerebras:m"], adapters=adapters)
    with anyio.fail_after(20):
        events = [event async for event in route.stream(request("route", stream=True))]
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].final_content[0].text == "fine"  # type: ignore[union-attr]
    assert len(refusing.requests) == 1
    await route.aclose()
