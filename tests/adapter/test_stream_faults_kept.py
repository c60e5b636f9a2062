"""A stream that fails midway over real sockets (the emulator's faults): the call's error is
classified, and what arrived before the fault is kept in the stream's events."""

from __future__ import annotations

import anyio
import pytest

from metis.errors import OverloadedError, ProtocolError
from metis.model import MessageComplete, StopKind, StreamEvent, TextDelta
from metis.testing.emulator import Emulator

from ..stack_table import adapter, story, target

pytestmark = pytest.mark.anyio


async def _events(stack: str, emulator: Emulator) -> tuple[list[StreamEvent], Exception]:
    built = adapter(stack, emulator, max_retries=0)
    events: list[StreamEvent] = []
    with anyio.fail_after(20), pytest.raises(Exception) as caught:
        async for event in built.stream(story(stack)):
            events.append(event)
    await built.aclose()
    assert isinstance(caught.value, Exception)
    return events, caught.value


@pytest.mark.parametrize("stack", ["bedrock", "bedrock_anthropic"])
async def test_a_corrupt_frame_keeps_the_frames_before_it(stack: str, emulator: Emulator) -> None:
    # The frames that came in the same read as the corrupt one were dropped with it: no text,
    # and no message.complete (the message had not started as far as metis knew).
    emulator.push_fault("malformed;after=3", provider=target(stack))
    events, error = await _events(stack, emulator)
    assert isinstance(error, ProtocolError) and "frame 4 is corrupt" in str(error)
    assert "".join(e.text for e in events if isinstance(e, TextDelta))
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR


@pytest.mark.parametrize("stack", ["openai", "openai_responses", "azure", "groq"])
async def test_an_overloaded_error_inside_a_stream_is_overloaded(
    stack: str, emulator: Emulator
) -> None:
    # OpenAI's 'The server is overloaded or not ready yet.' was OverloadedError as a 503 and a
    # ServerError inside a 200 stream: one condition, two classes (a fallback on overload
    # missed it).
    emulator.push_fault("stream_error=overloaded;after=6", provider=target(stack))
    events, error = await _events(stack, emulator)
    assert isinstance(error, OverloadedError) and error.retryable
    assert "".join(e.text for e in events if isinstance(e, TextDelta))
    emulator.push_fault("overloaded", provider=target(stack))
    _, error = await _events(stack, emulator)
    assert isinstance(error, OverloadedError)
