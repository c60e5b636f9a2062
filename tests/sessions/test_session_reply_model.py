"""``MessageComplete.model`` is the provider's own name for the model on every turn a session
makes, a turn ``Session.cancel()`` stops before it was sent as well as a finished one;
``CanonicalResponse.model`` is the canonical id."""

from __future__ import annotations

import pytest

from metis.model import Message, MessageComplete, StopKind
from metis.model.request import CanonicalRequest
from metis.routing import Router
from metis.sessions.models import Resolved
from metis.sessions.reply import Reply

from ..fakes import FakePeer, anthropic_reply

CLAUDE = "anthropic:claude-sonnet-4-5"


def call(model: str) -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=[Message.user("Hi")], max_output_tokens=64)


@pytest.mark.anyio
async def test_a_turn_cancelled_before_it_was_sent_names_the_model_as_a_finished_one() -> None:
    peer = FakePeer(anthropic_reply("Hello"))
    adapter = peer.adapter("anthropic", max_retries=0)
    events = [event async for event in adapter.stream(call(CLAUDE))]
    done = events[-1]
    assert isinstance(done, MessageComplete) and done.model == "m"  # as the provider said

    reply = Reply(Resolved(adapter, CLAUDE, ((adapter, CLAUDE),)), call(CLAUDE), 5)
    cancelled = reply.cancelled()
    assert cancelled.stop_reason.kind is StopKind.CANCELLED
    assert cancelled.model == adapter.wire_model(CLAUDE) == "claude-sonnet-4-5"
    assert reply.response is not None and reply.response.model == CLAUDE
    await adapter.aclose()


@pytest.mark.anyio
async def test_a_routed_turn_cancelled_before_it_was_sent_has_no_provider_model() -> None:
    peer = FakePeer(anthropic_reply("Hello"))
    adapter = peer.adapter("anthropic", max_retries=0)
    route = Router([CLAUDE], adapters={"anthropic": adapter}, max_retries=0, name="main")
    reply = Reply(Resolved(route, "route:main", ((adapter, CLAUDE),)), call("route:main"), 5)
    assert reply.cancelled().model is None  # no provider was asked
    assert reply.response is not None and reply.response.model == "route:main"
    await adapter.aclose()
