"""invariants: the canonical event stream keeps docs/contract.md §2 rules or fails loudly."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.errors import InvariantViolation, RateLimitError
from metis.model import (
    ContentBlock,
    MessageComplete,
    MessageStart,
    ProviderRaw,
    RedactedThinkingBlock,
    StopKind,
    StopReason,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    TokenUsage,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.pipeline.call import Call
from metis.stages.policy.invariants import RULES, Invariants, StreamChecker

from ..helpers import drive, make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

ORIGIN = ProviderRaw(provider="anthropic", model="anthropic:claude-x")


def _complete(*content: ContentBlock, kind: StopKind = StopKind.END_TURN) -> MessageComplete:
    return MessageComplete(list(content), StopReason(kind=kind), TokenUsage(), "msg_1")


def _valid() -> list[StreamEvent]:
    """Text, thinking (with signature), redacted thinking, two tools, complete."""
    return [
        MessageStart("msg_1", "claude-x"),
        TextDelta(0, "Hello, "),
        TextDelta(0, "world"),
        ThinkingDelta(1, "hmm "),
        ThinkingDelta(1, "ok"),
        ThinkingDelta(1, "", signature="sig-1"),
        ThinkingDelta(2, "", redacted_data="opaque"),
        ToolUseStart(3, "tu_a", "search"),
        ToolUseInputDelta(3, "tu_a", '{"q": '),
        ToolUseInputDelta(3, "tu_a", '"x"}'),
        ToolUseEnd(3, "tu_a", "search", {"q": "x"}),
        ToolUseStart(4, "tu_b", "read"),
        ToolUseEnd(4, "tu_b", "read", {}),
        _complete(
            TextBlock(text="Hello, world"),
            ThinkingBlock(thinking="hmm ok", signature="sig-1", provider_raw=ORIGIN),
            RedactedThinkingBlock(data="opaque", provider_raw=ORIGIN),
            ToolUseBlock(id="tu_a", name="search", input={"q": "x"}),
            ToolUseBlock(id="tu_b", name="read", input={}),
            kind=StopKind.TOOL_USE,
        ),
    ]


def _check_all(events: list[StreamEvent]) -> None:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()


def _violates(rule: int, events: list[StreamEvent]) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as info:
        _check_all(events)
    message = str(info.value)
    assert re.search(rf"\binvariant {rule}\b", message), message
    assert RULES[rule] in message
    return info.value


def test_a_valid_sequence_passes() -> None:
    _check_all(_valid())


def test_a_minimal_sequence_passes() -> None:
    _check_all([MessageStart(), _complete()])


def test_an_index_may_be_skipped() -> None:
    _check_all(
        [
            MessageStart(),
            TextDelta(0, "a"),
            TextDelta(2, "b"),  # index 1 never used: allowed (non-decreasing)
            _complete(TextBlock(text="a"), TextBlock(text=""), TextBlock(text="b")),
        ]
    )


def test_final_content_may_hold_more_than_the_deltas_said() -> None:
    # "plus any provider-authoritative state" (docs/contract.md §2)
    _check_all(
        [MessageStart(), TextDelta(0, "a"), _complete(TextBlock(text="a"), TextBlock(text="z"))]
    )


@pytest.mark.anyio
async def test_the_stage_passes_a_valid_stream_through_as_the_same_objects() -> None:
    events = _valid()
    _, out = await drive(Invariants(), "request", make_call(), events)
    assert len(out) == len(events)
    assert all(a is b for a, b in zip(out, events, strict=True))


@pytest.mark.anyio
async def test_the_stage_hands_the_request_through() -> None:
    seen, _ = await drive(Invariants(), {"any": "request"}, make_call(), _valid())
    assert seen == [{"any": "request"}]


# Rule 1 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        TextDelta(0, "x"),
        ThinkingDelta(0, "x"),
        ToolUseStart(0, "tu_1", "t"),
        ToolUseInputDelta(0, "tu_1", "{"),
        ToolUseEnd(0, "tu_1", "t", {}),
    ],
)
def test_rule_1_a_delta_before_message_start(first: StreamEvent) -> None:
    _violates(1, [first, MessageStart(), _complete()])


def test_rule_1_message_complete_before_message_start() -> None:
    _violates(1, [_complete()])


def test_rule_1_a_second_message_start() -> None:
    _violates(1, [MessageStart(), TextDelta(0, "a"), MessageStart(), _complete()])


# Rule 2 -------------------------------------------------------------------------------------


def test_rule_2_input_for_a_tool_never_started() -> None:
    _violates(2, [MessageStart(), ToolUseInputDelta(0, "tu_1", "{}")])


def test_rule_2_end_for_a_tool_never_started() -> None:
    _violates(2, [MessageStart(), ToolUseEnd(0, "tu_1", "t", {})])


def test_rule_2_a_second_start_for_one_tool() -> None:
    _violates(2, [MessageStart(), ToolUseStart(0, "tu_1", "t"), ToolUseStart(0, "tu_1", "t")])


def test_rule_2_a_second_end_for_one_tool() -> None:
    _violates(
        2,
        [
            MessageStart(),
            ToolUseStart(0, "tu_1", "t"),
            ToolUseEnd(0, "tu_1", "t", {}),
            ToolUseEnd(0, "tu_1", "t", {}),
        ],
    )


def test_rule_2_input_after_the_end() -> None:
    _violates(
        2,
        [
            MessageStart(),
            ToolUseStart(0, "tu_1", "t"),
            ToolUseEnd(0, "tu_1", "t", {}),
            ToolUseInputDelta(0, "tu_1", "{}"),
        ],
    )


def test_rule_2_a_tool_moving_to_another_index() -> None:
    _violates(
        2,
        [MessageStart(), ToolUseStart(0, "tu_1", "t"), ToolUseInputDelta(1, "tu_1", "{}")],
    )


def test_rule_2_a_tool_never_ended() -> None:
    error = _violates(
        2,
        [
            MessageStart(),
            ToolUseStart(0, "tu_1", "t"),
            _complete(ToolUseBlock(id="tu_1", name="t")),
        ],
    )
    assert "tu_1" in str(error)


# Rule 3 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [[1, 2], "{}", None, 3])
def test_rule_3_final_input_not_an_object(bad: Any) -> None:
    _violates(3, [MessageStart(), ToolUseStart(0, "tu_1", "t"), ToolUseEnd(0, "tu_1", "t", bad)])


# Rule 4 -------------------------------------------------------------------------------------


def test_rule_4_an_event_after_message_complete() -> None:
    _violates(4, [MessageStart(), _complete(), TextDelta(0, "late")])


def test_rule_4_a_second_message_complete() -> None:
    _violates(4, [MessageStart(), _complete(), _complete()])


def test_rule_4_the_stream_ends_without_message_complete() -> None:
    _violates(4, [MessageStart(), TextDelta(0, "a")])
    _violates(4, [])


def test_rule_4_final_text_differs_from_the_deltas() -> None:
    _violates(4, [MessageStart(), TextDelta(0, "ab"), _complete(TextBlock(text="abc"))])


def test_rule_4_final_content_lacks_a_text_block() -> None:
    _violates(4, [MessageStart(), TextDelta(0, "ab"), _complete()])
    _violates(4, [MessageStart(), TextDelta(0, "ab"), _complete(ThinkingBlock(thinking="ab"))])


def test_rule_4_final_content_lacks_a_tool() -> None:
    events = [MessageStart(), ToolUseStart(0, "tu_1", "t"), ToolUseEnd(0, "tu_1", "t", {})]
    _violates(4, [*events, _complete()])
    _violates(4, [*events, _complete(ToolUseBlock(id="tu_other", name="t"))])
    _violates(4, [*events, _complete(TextBlock(text=""))])


def test_rule_4_final_tool_input_or_name_differs() -> None:
    events = [MessageStart(), ToolUseStart(0, "tu_1", "t"), ToolUseEnd(0, "tu_1", "t", {"a": 1})]
    _check_all([*events, _complete(ToolUseBlock(id="tu_1", name="t", input={"a": 1}))])
    _violates(4, [*events, _complete(ToolUseBlock(id="tu_1", name="t", input={"a": 2}))])
    _violates(4, [*events, _complete(ToolUseBlock(id="tu_1", name="u", input={"a": 1}))])


def test_rule_4_final_thinking_differs_from_the_deltas() -> None:
    events: list[StreamEvent] = [
        MessageStart(),
        ThinkingDelta(0, "ab"),
        ThinkingDelta(0, "", signature="s"),
    ]
    _check_all([*events, _complete(ThinkingBlock(thinking="ab", signature="s"))])
    _violates(4, [*events, _complete(ThinkingBlock(thinking="abc", signature="s"))])
    _violates(4, [*events, _complete(ThinkingBlock(thinking="ab", signature="t"))])
    _violates(4, [*events, _complete(TextBlock(text="ab"))])
    _violates(4, [*events, _complete()])


def test_rule_4_final_redacted_thinking_differs_from_the_deltas() -> None:
    events: list[StreamEvent] = [MessageStart(), ThinkingDelta(0, "", redacted_data="xyz")]
    _check_all([*events, _complete(RedactedThinkingBlock(data="xyz"))])
    _violates(4, [*events, _complete(RedactedThinkingBlock(data="xy"))])
    _violates(4, [*events, _complete(ThinkingBlock(thinking=""))])


# Rule 5 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "late",
    [
        TextDelta(0, "x"),
        ThinkingDelta(0, "x"),
        ToolUseStart(0, "tu_9", "t"),
    ],
)
def test_rule_5_an_index_going_back(late: StreamEvent) -> None:
    _violates(5, [MessageStart(), TextDelta(0, "a"), TextDelta(1, "b"), late])


def test_rule_5_a_tool_end_going_back() -> None:
    _violates(
        5,
        [
            MessageStart(),
            ToolUseStart(0, "tu_1", "t"),
            TextDelta(1, "b"),
            ToolUseEnd(0, "tu_1", "t", {}),
        ],
    )


def test_an_unknown_event_type_is_refused() -> None:
    class Odd(StreamEvent):
        __slots__ = ()
        type = "odd"

    with pytest.raises(InvariantViolation, match="Odd"):
        StreamChecker().check(Odd())


# The stage ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_stage_raises_on_a_violation_after_yielding_what_was_valid() -> None:
    events: list[StreamEvent] = [MessageStart(), TextDelta(1, "a"), TextDelta(0, "b")]
    seen: list[StreamEvent] = []

    async def inner(request: Any, call: Call) -> Any:
        for event in events:
            yield event

    with pytest.raises(InvariantViolation, match="invariant 5"):
        async for event in Invariants()("r", make_call(), inner):
            seen.append(event)
    assert seen == events[:2]


@pytest.mark.anyio
async def test_the_stage_refuses_a_stream_ending_without_message_complete() -> None:
    with pytest.raises(InvariantViolation, match="invariant 4"):
        await drive(Invariants(), "r", make_call(), [MessageStart(), TextDelta(0, "a")])


@pytest.mark.anyio
@pytest.mark.parametrize("after", [0, 1, 2])
async def test_errors_from_inside_propagate_unchanged(after: int) -> None:
    error = RateLimitError("slow down", retry_after_seconds=3)
    events = [MessageStart(), TextDelta(0, "a")][:after]

    async def inner(request: Any, call: Call) -> Any:
        for event in events:
            yield event
        raise error

    with pytest.raises(RateLimitError) as info:
        [e async for e in Invariants()("r", make_call(), inner)]
    assert info.value is error


@pytest.mark.anyio
async def test_a_non_adapter_error_from_inside_is_not_turned_into_a_violation() -> None:
    async def inner(request: Any, call: Call) -> Any:
        yield MessageStart()
        raise KeyError("boom")

    with pytest.raises(KeyError):
        [e async for e in Invariants()("r", make_call(), inner)]


@pytest.mark.anyio
async def test_a_consumer_that_stops_early_gets_no_violation() -> None:
    events = _valid()

    async def inner(request: Any, call: Call) -> Any:
        for event in events:
            yield event

    stream: Any = Invariants()("r", make_call(), inner)
    assert await stream.__anext__() is events[0]
    await stream.aclose()  # no message.complete seen, and nothing raised


# The text fast path: the same verdict as the long way ---------------------------------------

_INDICES = st.integers(min_value=0, max_value=3)
_EVENTS = st.one_of(
    st.builds(TextDelta, _INDICES, st.sampled_from(["a", "b", ""])),
    st.builds(ThinkingDelta, _INDICES, st.sampled_from(["x", "y"])),
    st.just(MessageStart()),
    st.builds(
        lambda texts: MessageComplete(
            [TextBlock(text=text) for text in texts],
            StopReason(kind=StopKind.END_TURN),
            TokenUsage(input_tokens=1, output_tokens=1),
        ),
        st.lists(st.sampled_from(["", "a", "ab", "ba"]), max_size=3),
    ),
)


def _verdict(check: Any, events: list[StreamEvent]) -> tuple[int, str]:
    """How many events ``check`` passed, and the violation that stopped it ("" if none)."""
    for passed, event in enumerate(events):
        try:
            assert check(event) is event
        except InvariantViolation as error:
            return passed, str(error)
    return len(events), ""


@settings(deadline=None)
@given(st.lists(_EVENTS, max_size=12))
def test_the_text_fast_path_gives_the_verdict_of_the_long_way(events: list[StreamEvent]) -> None:
    fast, slow = StreamChecker(), StreamChecker()
    events = [MessageStart(), *events] if events and len(events) % 2 else events
    assert _verdict(fast.check, events) == _verdict(slow._check, events)
    assert fast._text == slow._text
