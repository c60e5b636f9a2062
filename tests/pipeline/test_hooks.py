"""Per-event hooks and the engine's one loop (docs/engine.md): what a watch may do with an
event, when ``completed`` and ``close`` run, and that a call's state lives on its watch."""

from __future__ import annotations

import inspect
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from metis import build_adapter
from metis.errors import InvalidRequestError, NetworkError
from metis.model import CanonicalRequest, Message, MessageComplete, MessageStart, StreamEvent
from metis.model.content import TextBlock
from metis.model.events import TextDelta
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.pipeline import Pipeline
from metis.pipeline.request import WireRequest
from metis.pipeline.segments import stage_kind
from metis.pipeline.stage import Inner, RequestStage, Stage
from metis.wire import builder

from ..helpers import make_call

pytestmark = pytest.mark.backend_independent


class Encode(Stage[CanonicalRequest, WireRequest, Any, Any]):
    name = "fake_encode"

    def __call__(
        self, request: CanonicalRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> Any:
        return inner(WireRequest(url="http://x", body={}), call)


class Answer(Stage[WireRequest, Any, Any, StreamEvent]):
    name = "answer"
    terminal = True

    def __init__(self, fail: Exception | None = None) -> None:
        super().__init__()
        self.fail = fail

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[StreamEvent]:
        yield MessageStart("m1", "x")
        yield TextDelta(0, "a")
        yield TextDelta(0, "b")
        if self.fail is not None:
            raise self.fail
        yield MessageComplete(
            [TextBlock(text="ab")], StopReason(kind=StopKind.END_TURN), TokenUsage()
        )


class Recording(Watch):
    def __init__(self, log: list[str], tag: str, verdict: Any = "pass") -> None:
        self.log, self.tag, self.verdict = log, tag, verdict

    def event(self, event: StreamEvent) -> Any:
        self.log.append(f"{self.tag}:{event.type}")
        if isinstance(event, TextDelta) and event.text == "a":
            return self.verdict(event) if callable(self.verdict) else event
        return event

    async def completed(self, event: MessageComplete) -> None:
        self.log.append(f"{self.tag}:completed")

    def close(self, error: BaseException | None) -> BaseException | None:
        self.log.append(f"{self.tag}:close:{type(error).__name__ if error else None}")
        return None


class Hook(EventHook[CanonicalRequest]):
    def __init__(self, name: str, log: list[str], verdict: Any = "pass") -> None:
        super().__init__()
        self.name = name  # type: ignore[misc]
        self.log, self.verdict = log, verdict

    async def open(self, request: CanonicalRequest, call: Call) -> tuple[CanonicalRequest, Watch]:
        self.log.append(f"{self.name}:open")
        return request, Recording(self.log, self.name, self.verdict)


def ask() -> CanonicalRequest:
    return CanonicalRequest(model="x:y", messages=[Message.user("hi")], max_output_tokens=8)


async def run(pipeline: Pipeline) -> list[StreamEvent]:
    async with pipeline.run(ask(), make_call()) as events:
        return [event async for event in events]


@pytest.mark.anyio
async def test_hooks_open_in_stack_order_and_see_events_innermost_first() -> None:
    log: list[str] = []
    pipeline = Pipeline([Hook("outer", log), Hook("inner", log), Encode(), Answer()])
    await run(pipeline)
    assert log[:2] == ["outer:open", "inner:open"]
    assert log[2:4] == ["inner:message.start", "outer:message.start"]
    assert log[-4:] == [
        "inner:completed",
        "outer:completed",
        "inner:close:None",
        "outer:close:None",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("verdict", "texts"),
    [
        (lambda e: None, ["b"]),  # dropped
        (lambda e: TextDelta(0, "A"), ["A", "b"]),  # replaced by a new event
        (lambda e: [e, TextDelta(0, "+")], ["a", "+", "b"]),  # several in its place
    ],
)
async def test_a_watch_passes_replaces_drops_or_spreads_an_event(
    verdict: Any, texts: list[str]
) -> None:
    log: list[str] = []
    outer: list[str] = []
    pipeline = Pipeline([Hook("outer", outer), Hook("inner", log, verdict), Encode(), Answer()])
    events = await run(pipeline)
    assert [e.text for e in events if isinstance(e, TextDelta)] == texts
    assert [line for line in outer if line == "outer:text.delta"] == ["outer:text.delta"] * len(
        texts
    )


@pytest.mark.anyio
async def test_close_sees_the_error_and_may_put_another_in_its_place() -> None:
    log: list[str] = []

    class Reword(Watch):
        def close(self, error: BaseException | None) -> BaseException | None:
            return InvalidRequestError("reworded") if isinstance(error, NetworkError) else None

    class Rewording(EventHook[CanonicalRequest]):
        name = "reword"

        async def open(
            self, request: CanonicalRequest, call: Call
        ) -> tuple[CanonicalRequest, Watch]:
            return request, Reword()

    pipeline = Pipeline([Hook("outer", log), Rewording(), Encode(), Answer(NetworkError("down"))])
    with pytest.raises(InvalidRequestError, match="reworded") as caught:
        await run(pipeline)
    assert isinstance(caught.value.__context__, NetworkError)  # the original stays attached
    assert log[-1] == "outer:close:InvalidRequestError"  # outer watches see the replacement


@pytest.mark.anyio
async def test_each_call_gets_a_watch_of_its_own() -> None:
    log: list[str] = []
    hook = Hook("h", log)
    pipeline = Pipeline([hook, Encode(), Answer()])
    async with (
        pipeline.run(ask(), make_call()) as first,
        pipeline.run(ask(), make_call()) as second,
    ):
        a, b = await anext(first), await anext(second)
        assert a.type == b.type == "message.start"
        rest = [e async for e in first]
    assert len(rest) == 3 and log.count("h:open") == 2


def test_the_kind_of_every_stage_is_what_it_implements() -> None:
    class Upper(RequestStage[CanonicalRequest]):
        name = "upper"

    assert stage_kind(Upper()) == "transform"
    assert stage_kind(Hook("h", [])) == "hook"
    assert stage_kind(Encode()) == "wrapper" and stage_kind(Answer()) == "terminal"


ANTHROPIC_SSE = b"".join(
    b"event: x\ndata: " + line + b"\n\n"
    for line in (
        b'{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1,"output_tokens":1}}}',
        b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}',
        b'{"type":"content_block_stop","index":0}',
        b'{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
        b'{"type":"message_stop"}',
    )
)


@pytest.mark.anyio
async def test_an_event_crosses_two_generator_frames_of_metis_on_the_default_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first engine ran a generator per stage that looks at events (transport, decode,
    normalize, retry, tool_ids, invariants and the adapter's own: seven on this stack); the
    send path is one loop and the hooks run in the call's. Counted at the codec, where each
    text delta is made: every metis generator an event crosses is on the stack there, or
    (the transport and decode, which hand bytes and objects up) fused into the send loop.
    ``retry`` is no generator: once an attempt's first item is out it hands that attempt's
    own iterator on (tests/stages/test_retry.py)."""
    frames: list[list[str]] = []
    text = builder.MessageBuilder.text

    def spy(self: Any, key: Any, fragment: str) -> None:
        seen, frame = [], sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            if code.co_flags & inspect.CO_ASYNC_GENERATOR and "/metis/" in code.co_filename:
                seen.append(code.co_name)
            frame = frame.f_back
        frames.append(seen)
        text(self, key, fragment)

    monkeypatch.setattr(builder.MessageBuilder, "text", spy)
    answer = httpx.Response(
        200, content=ANTHROPIC_SSE, headers={"content-type": "text/event-stream"}
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: answer))
    adapter = build_adapter("anthropic", api_key="k", http_client=client)
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5", messages=[Message.user("hi")], max_output_tokens=8
    )
    events = [event async for event in adapter.stream(request)]
    assert events[-1].type == "message.complete"
    # The send loop and the call (the adapter's own watch runs in the call's segment).
    assert frames == [["_send", "run_segment"]]


@pytest.mark.anyio
async def test_a_watch_is_called_only_for_the_kinds_it_looks_at() -> None:
    seen: list[str] = []

    class Starts(Watch):
        kinds = (MessageStart,)

        def event(self, event: StreamEvent) -> Any:
            seen.append(event.type)
            return event

    class Hooked(EventHook[CanonicalRequest]):
        name = "starts"

        async def open(
            self, request: CanonicalRequest, call: Call
        ) -> tuple[CanonicalRequest, Watch]:
            return request, Starts()

    events = await run(Pipeline([Hooked(), Encode(), Answer()]))
    assert seen == ["message.start"] and len(events) == 4


@pytest.mark.anyio
async def test_events_a_watch_puts_in_place_of_one_reach_the_outer_watches_of_their_kind() -> None:
    """A text delta spread into a text delta and a message.start: the outer watch, which
    looks only at message.start, sees the new one (and the first, from the answer)."""
    log: list[str] = []

    class Starts(Watch):
        kinds = (MessageStart,)

        def event(self, event: StreamEvent) -> Any:
            log.append(f"outer:{event.type}")
            return event

    class Outer(EventHook[CanonicalRequest]):
        name = "outer"

        async def open(
            self, request: CanonicalRequest, call: Call
        ) -> tuple[CanonicalRequest, Watch]:
            return request, Starts()

    spread = Hook("inner", [], lambda e: [e, MessageStart("m2", "x")])
    await run(Pipeline([Outer(), spread, Encode(), Answer()]))
    assert log == ["outer:message.start", "outer:message.start"]


@pytest.mark.anyio
async def test_a_watch_that_raises_at_the_end_is_seen_by_the_watches_outside_it() -> None:
    """invariants raises when a stream ends without message.complete; the watches outside it
    (the adapter's own, which lets the call's cancel handle go) still close, with its error."""
    from metis.errors import InvariantViolation
    from metis.stages.policy.invariants import Invariants

    class Short(Stage[WireRequest, Any, Any, StreamEvent]):
        name = "short"
        terminal = True

        async def __call__(
            self, request: WireRequest, call: Call, inner: Inner[Any, Any]
        ) -> AsyncIterator[StreamEvent]:
            yield MessageStart("m1", "x")

    log: list[str] = []

    async def start(request: CanonicalRequest) -> tuple[CanonicalRequest, Call, Watch]:
        return request, make_call(), Recording(log, "caller")

    pipeline = Pipeline([Invariants(), Encode(), Short()])
    with pytest.raises(InvariantViolation, match=r"without message\.complete"):
        async for _ in pipeline.stream(ask(), start):
            pass
    assert log[-1] == "caller:close:InvariantViolation"


def test_watches_that_look_alike_each_get_their_own_events() -> None:
    """Which watch sees which class is worked out once for watches that look at the same
    classes; each call's table still calls its own watches (a watch's own ``kinds``, even an
    unhashable list, counts)."""
    from metis.model.events import ToolUseStart
    from metis.pipeline.hooks import Watches

    class Seen(Watch):
        kinds = (TextDelta,)

        def __init__(self) -> None:
            self.seen: list[StreamEvent] = []

        def event(self, event: StreamEvent) -> StreamEvent:
            self.seen.append(event)
            return event

    class Listed(Seen):
        def __init__(self) -> None:
            super().__init__()
            self.kinds = [ToolUseStart]  # type: ignore[assignment]

    first, second, listed = Seen(), Seen(), Listed()
    for watch, text in ((first, "a"), (second, "b")):
        table = Watches([watch, Watch()]).table
        assert len(table[TextDelta]) == 2 and table[MessageStart] == (table[MessageStart][0],)
        for see in table[TextDelta]:
            see(TextDelta(0, text))
    assert [e.text for e in first.seen] == ["a"]  # type: ignore[attr-defined]
    assert [e.text for e in second.seen] == ["b"]  # type: ignore[attr-defined]
    table = Watches([listed]).table
    assert table[TextDelta] == () and len(table[ToolUseStart]) == 1
    assert Watches([]).table[TextDelta] == ()
