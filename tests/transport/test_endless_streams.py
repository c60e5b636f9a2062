"""A stream that never ends, over a real socket (tests/fault_proxy.py), under asyncio and trio:
an upstream that sends Anthropic ``ping`` events, SSE comments or text deltas at a steady
pace and never its end. Each one keeps the idle timeout from running out (bytes keep coming),
so what bounds the call is its deadline, ``timeout_seconds`` (README, "Errors, retries,
timeouts, cancellation"): the call ends there as a ``network`` error, after a
``message.complete`` (stop reason ``error``) keeping the text that came."""

from __future__ import annotations

import pytest

from metis.errors import ErrorClass, NetworkError
from metis.model import MessageComplete, StreamEvent, TextDelta
from metis.model.response import StopKind
from metis.transport.stage import Transport

from ..fakes import anthropic_start, sse
from ..fault_proxy import FaultProxy, Pause, chunk, chunked_head
from .test_deadlines import adapter_for, request, timed

DEADLINES = (1.0, 5.0)
"""Each twice the idle timeout, which the keep-alives (every PACE) never let run out: a loaded
machine that held the process past the idle timeout between two of them (the idle timeout then
ran out first) gets the test once more with the longer one; every keep-alive ignored by the
idle timeout fails both."""
PACE = 0.05
STEPS = 800  # 40 s of keep-alives: past timed()'s bound on a hang, which fails the test then

TEXT = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "la "}}
KEEP_ALIVES = {
    "ping": sse({"type": "ping"})[0].encode(),
    "comment": b": keep-alive\n\n",
    "text": sse(TEXT)[0].encode(),
}


def endless(kind: str) -> list[object]:
    opened = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    first = [chunked_head(), chunk("".join(sse(anthropic_start(), opened)).encode())]
    beat = chunk(KEEP_ALIVES[kind])
    return first + [step for _ in range(STEPS) for step in (beat, Pause(PACE))]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(KEEP_ALIVES))
async def test_a_stream_that_never_ends_ends_at_the_calls_deadline(kind: str) -> None:
    for deadline in DEADLINES:
        async with FaultProxy.running() as proxy, timed() as elapsed:
            proxy.script(*endless(kind))
            adapter = adapter_for(proxy.url, timeout_seconds=deadline)
            # an idle timeout shorter than the deadline, which the keep-alives never let run out
            adapter.pipeline.replace("transport", Transport(idle_timeout=deadline / 2))
            events: list[StreamEvent] = []
            with pytest.raises(NetworkError) as caught:
                async for event in adapter.stream(request(adapter.name)):
                    events.append(event)
            await adapter.aclose()
        if "stalled" not in str(caught.value):
            break
    assert elapsed() >= deadline - 0.1  # not the idle timeout (the stream never ends)
    assert caught.value.error_class is ErrorClass.NETWORK
    assert f"the call's timeout ({deadline:g} s) ran out" in str(caught.value)
    complete = events[-1]
    assert isinstance(complete, MessageComplete)
    assert complete.stop_reason.kind is StopKind.ERROR
    sent = "".join(e.text for e in events if isinstance(e, TextDelta))
    kept = "".join(getattr(block, "text", "") for block in complete.final_content)
    assert kept == sent and (sent != "") is (kind == "text")
