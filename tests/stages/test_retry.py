"""Retries (docs/contract.md §4 items 10 and 11) through real adapters."""

from __future__ import annotations

import email.utils
import json
import sys
import time
from collections.abc import AsyncIterator

import pytest

from metis import ErrorClass
from metis.errors import (
    RETRY_POLICY,
    InvalidRequestError,
    NetworkError,
    OverloadedError,
    RateLimitError,
    ServerError,
)
from metis.model import MessageComplete, TextDelta
from metis.model.response import StopKind

from ..conftest import Waits
from ..fakes import (
    DROP,
    FakePeer,
    Reply,
    anthropic_error,
    anthropic_reply,
    anthropic_start,
    anthropic_text,
    collect,
    openai_error,
    request,
    sse,
)

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for


@pytest.mark.anyio
async def test_transient_errors_are_retried_with_backoff_then_succeed(no_backoff: Waits) -> None:
    peer = FakePeer(
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(500, "api_error", "Internal server error"),
        anthropic_reply("fine"),
    )
    adapter = peer.adapter("anthropic")
    slept = no_backoff
    events = await collect(adapter, request("anthropic"))
    assert len(peer.requests) == 3
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["fine"]
    overloaded, server = RETRY_POLICY[ErrorClass.OVERLOADED], RETRY_POLICY[ErrorClass.SERVER_ERROR]
    assert overloaded.base_delay <= slept[0] <= overloaded.base_delay * 1.25  # first backoff
    assert 2 * server.base_delay <= slept[1] <= 2 * server.base_delay * 1.25  # doubled


@pytest.mark.anyio
async def test_overloaded_backs_off_longer_than_rate_limit() -> None:
    assert (
        RETRY_POLICY[ErrorClass.OVERLOADED].base_delay
        > RETRY_POLICY[ErrorClass.RATE_LIMIT].base_delay
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "120"}, 60.0),  # capped
    ],
)
async def test_retry_after_is_honoured_and_capped(
    headers: dict[str, str], expected: float, no_backoff: Waits
) -> None:
    peer = FakePeer(
        openai_error(429, "rate_limit_exceeded", "slow down", **headers), openai_reply()
    )
    adapter = peer.adapter("openai")
    slept = no_backoff
    await collect(adapter, request("openai"))
    assert slept == [expected]


@pytest.mark.anyio
async def test_retry_after_as_an_http_date(no_backoff: Waits) -> None:
    when = email.utils.formatdate(time.time() + 10, usegmt=True)
    peer = FakePeer(
        anthropic_error(429, "rate_limit_error", "slow", **{"retry-after": when}),
        anthropic_reply("ok"),
    )
    adapter = peer.adapter("anthropic")
    slept = no_backoff
    await collect(adapter, request("anthropic"))
    assert 8.0 <= slept[0] <= 10.0


@pytest.mark.anyio
async def test_attempts_are_one_plus_max_retries_and_the_last_error_is_raised() -> None:
    peer = FakePeer(*(anthropic_error(500, "api_error", f"boom {i}") for i in range(4)))
    adapter = peer.adapter("anthropic", max_retries=2)
    with pytest.raises(ServerError, match="boom 2") as caught:
        await collect(adapter, request("anthropic"))
    assert len(peer.requests) == 3
    assert caught.value.retryable is True


@pytest.mark.anyio
async def test_the_last_error_says_how_many_attempts_failed(no_backoff: Waits) -> None:
    """A user who set max_retries saw one error after seconds of waits, with no word that it
    was retried: the error carries a note of the attempts (none when it was not retried)."""
    peer = FakePeer(*(anthropic_error(500, "api_error", f"boom {i}") for i in range(4)))
    adapter = peer.adapter("anthropic", max_retries=2)
    with pytest.raises(ServerError) as caught:
        await collect(adapter, request("anthropic"))
    assert caught.value.__notes__ == [
        "metis: 3 attempts failed (max_retries=2); the last one's error"
    ]
    peer = FakePeer(anthropic_error(529, "overloaded_error", "Overloaded"))
    with pytest.raises(OverloadedError) as caught:
        await collect(peer.adapter("anthropic", max_retries=0), request("anthropic"))
    assert not hasattr(caught.value, "__notes__")


@pytest.mark.anyio
async def test_an_error_not_retried_for_the_deadline_says_so(no_backoff: Waits) -> None:
    peer = FakePeer(
        openai_error(429, "rate_limit_exceeded", "slow down", **{"retry-after": "30"}),
        openai_reply(),
    )
    with pytest.raises(RateLimitError) as caught:
        await collect(peer.adapter("openai", timeout_seconds=10), request("openai"))
    assert caught.value.__notes__ == [
        "metis: not retried: the wait before a retry (30 s) would end past the call's "
        "deadline (timeout_seconds)"
    ]


@pytest.mark.anyio
async def test_max_retries_zero_means_one_attempt() -> None:
    peer = FakePeer(anthropic_error(529, "overloaded_error", "Overloaded"))
    adapter = peer.adapter("anthropic", max_retries=0)
    with pytest.raises(OverloadedError):
        await collect(adapter, request("anthropic"))
    assert len(peer.requests) == 1


@pytest.mark.anyio
async def test_a_client_error_is_not_retried(no_backoff: Waits) -> None:
    peer = FakePeer(openai_error(400, None, "bad param"))
    adapter = peer.adapter("openai")
    slept = no_backoff
    with pytest.raises(InvalidRequestError):
        await collect(adapter, request("openai"))
    assert len(peer.requests) == 1 and slept == []


@pytest.mark.anyio
async def test_insufficient_quota_is_a_rate_limit_that_is_not_retried() -> None:
    peer = FakePeer(openai_error(429, "insufficient_quota", "You exceeded your current quota"))
    adapter = peer.adapter("openai")
    with pytest.raises(RateLimitError) as caught:
        await collect(adapter, request("openai"))
    assert len(peer.requests) == 1 and caught.value.retryable is False


@pytest.mark.anyio
async def test_a_network_failure_before_any_event_is_retried(no_backoff: Waits) -> None:
    import httpx

    peer = FakePeer(httpx.ConnectError("connection refused"), anthropic_reply("back"))
    adapter = peer.adapter("anthropic")
    slept = no_backoff
    events = await collect(adapter, request("anthropic"))
    assert len(peer.requests) == 2 and len(slept) == 1
    assert isinstance(events[-1], MessageComplete)


@pytest.mark.anyio
async def test_an_in_stream_error_before_any_event_is_retried() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    peer = FakePeer(Reply(chunks=sse(overloaded)), anthropic_reply("second time"))
    adapter = peer.adapter("anthropic")
    events = await collect(adapter, request("anthropic"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["second time"]


@pytest.mark.anyio
async def test_after_an_event_reached_the_caller_a_failure_ends_the_stream_unretried(
    no_backoff: Waits,
) -> None:
    """docs/contract.md §4: the partial content comes in message.complete(error), then the error."""
    chunks = sse(anthropic_start(), *anthropic_text("partial ", "answer")[:-1])
    peer = FakePeer(Reply(chunks=[*chunks, DROP]), anthropic_reply("never sent"))
    adapter = peer.adapter("anthropic")
    slept = no_backoff
    events = []
    with pytest.raises(NetworkError):
        async for event in adapter.stream(request("anthropic")):
            events.append(event)
    assert len(peer.requests) == 1 and slept == []
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.ERROR
    assert final.final_content[0].text == "partial answer"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_complete_retries_too_and_keeps_the_partial_response_on_failure() -> None:
    body = json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    )
    peer = FakePeer(
        anthropic_error(503, "api_error", "unavailable"),
        Reply(chunks=[body], headers={"content-type": "application/json"}),
    )
    adapter = peer.adapter("anthropic")
    response = await adapter.complete(request("anthropic", stream=False))
    assert response.text == "ok" and len(peer.requests) == 2


def openai_reply() -> Reply:
    return Reply(
        chunks=[
            *sse(
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]},
                names=False,
            ),
            *sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, names=False),
            "data: [DONE]\n\n",
        ]
    )


@pytest.mark.anyio
async def test_each_attempt_is_visible_to_telemetry_as_seed_000_9_3_describes() -> None:
    from metis.telemetry import ListSink

    peer = FakePeer(
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_reply("third time lucky"),
    )
    adapter = peer.adapter("anthropic")
    sink = ListSink()
    adapter.telemetry = sink
    await collect(adapter, request("anthropic"))
    seen = [(e.name, e.retry_count, getattr(e, "error_class", None)) for e in sink.events]
    assert seen == [
        ("llm.call_started", 0, None),
        ("llm.call_failed", 0, "overloaded"),
        ("llm.call_started", 1, None),
        ("llm.call_failed", 1, "overloaded"),
        ("llm.call_started", 2, None),
        ("llm.call_completed", 2, None),
    ]


@pytest.mark.anyio
async def test_a_retry_after_longer_than_the_time_left_ends_the_call_unslept(
    no_backoff: Waits,
) -> None:
    peer = FakePeer(
        openai_error(429, "rate_limit_exceeded", "slow down", **{"retry-after": "30"}),
        openai_reply(),
    )
    adapter = peer.adapter("openai", timeout_seconds=10)
    slept = no_backoff
    with pytest.raises(RateLimitError) as caught:
        await collect(adapter, request("openai"))
    assert caught.value.retry_after_seconds == 30.0
    assert len(peer.requests) == 1 and slept == []


@pytest.mark.anyio
async def test_a_backoff_that_would_end_past_the_deadline_is_not_slept(no_backoff: Waits) -> None:
    # The waits are recorded, not slept, so the clock stands still but for the attempts: the
    # first backoff (1-1.25 s) fits in 1.95 s with 0.7 s to spare for a loaded machine's
    # first attempt, and the next (2-2.5 s) would end past the deadline however fast it runs.
    peer = FakePeer(*(anthropic_error(500, "api_error", f"boom {i}") for i in range(4)))
    adapter = peer.adapter("anthropic", timeout_seconds=1.95, max_retries=3)
    slept = no_backoff
    with pytest.raises(ServerError, match="boom 1"):
        await collect(adapter, request("anthropic"))
    assert len(peer.requests) == 2 and len(slept) == 1


# The stage alone: after the first item, the attempt's own iterator ------------------------


def _overloaded() -> OverloadedError:
    return OverloadedError("busy", provider="anthropic")


@pytest.mark.anyio
async def test_the_items_of_an_attempt_are_asked_of_it_directly_after_the_first() -> None:
    """After the first item nothing is retried, so retry is no frame between the caller and
    the attempt: every later item is produced with the caller's own frame just above."""
    from metis.stages.control.retry import Retry

    from ..helpers import bound, make_call

    callers: list[str] = []

    async def inner(request: object, call: object) -> AsyncIterator[int]:
        for item in range(3):
            callers.append(sys._getframe(1).f_code.co_name)
            yield item

    async def consume() -> list[int]:
        items = []
        async for item in bound(Retry())(None, make_call(), inner):
            items.append(item)
        return items

    assert await consume() == [0, 1, 2]
    assert callers[1:] == ["consume", "consume"]


@pytest.mark.anyio
async def test_a_failure_before_the_first_item_is_retried_and_one_after_it_is_not() -> None:
    from metis.stages.control.retry import Retry

    from ..helpers import bound, make_call

    attempts: list[int] = []

    async def inner(request: object, call: object) -> AsyncIterator[str]:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise _overloaded()
        yield "first"
        raise _overloaded()

    items: list[str] = []
    with pytest.raises(OverloadedError) as raised:
        async for item in bound(Retry())(None, make_call(), inner):
            items.append(item)
    assert items == ["first"] and attempts == [0, 1]
    assert raised.value.message == "busy"


@pytest.mark.anyio
async def test_an_attempt_with_no_items_ends_the_stream_and_is_not_run_again() -> None:
    from metis.stages.control.retry import Retry

    from ..helpers import bound, make_call

    attempts: list[int] = []

    async def inner(request: object, call: object) -> AsyncIterator[str]:
        attempts.append(1)
        return
        yield "never"

    stream = bound(Retry())(None, make_call(), inner)
    assert [item async for item in stream] == []
    assert [item async for item in stream] == []
    assert attempts == [1]


@pytest.mark.anyio
async def test_a_stream_closed_before_it_began_sends_nothing() -> None:
    from metis.stages.control.retry import Retry

    from ..helpers import bound, make_call

    attempts: list[int] = []

    async def inner(request: object, call: object) -> AsyncIterator[str]:
        attempts.append(1)
        yield "never"

    stream = bound(Retry())(None, make_call(), inner)
    await stream.aclose()  # type: ignore[attr-defined]
    assert [item async for item in stream] == [] and attempts == []


@pytest.mark.anyio
@pytest.mark.parametrize("retries", [0, 2])
async def test_one_attempt_or_more_hand_on_the_same_items_and_the_same_failures(
    retries: int,
) -> None:
    """With no retry allowed the one attempt runs without the retrying machinery, and gives
    what an attempt of a retrying call gives: its items, or its error as it was raised."""
    from metis.pipeline.config import AdapterConfig
    from metis.stages.control.retry import Retry

    from ..helpers import bound, make_call

    async def inner(request: object, call: object) -> AsyncIterator[int]:
        yield call.attempt  # type: ignore[attr-defined]
        yield 1

    async def failing(request: object, call: object) -> AsyncIterator[int]:
        raise InvalidRequestError("bad")
        yield 0

    assert [
        i
        async for i in bound(Retry(), config=AdapterConfig(max_retries=retries))(
            None, make_call(), inner
        )
    ] == [
        0,
        1,
    ]
    with pytest.raises(InvalidRequestError, match="bad"):
        async for _ in bound(Retry(), config=AdapterConfig(max_retries=retries))(
            None, make_call(), failing
        ):
            pass
