"""MessageBuilder: provider blocks in, canonical events and final content out (contract §2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.model import (
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
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import INVALID_ARGUMENTS, MessageBuilder

PROVIDER, MODEL = "anthropic", "anthropic:claude-x"


class Warnings:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))


class _Recording(MessageBuilder):
    """A builder whose ``out`` is every event it has handed out so far (through ``take``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.taken: list[StreamEvent] = []

    @property
    def out(self) -> list[StreamEvent]:
        self.taken += self.take()
        return self.taken


def _builder(**kwargs: Any) -> tuple[_Recording, Warnings]:
    warns = Warnings()
    return _Recording(PROVIDER, MODEL, warns, **kwargs), warns


def _valid(events: list[StreamEvent]) -> list[StreamEvent]:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events


def _complete(builder: _Recording) -> MessageComplete:
    last = builder.out[-1]
    assert isinstance(last, MessageComplete)
    return last


def _kinds(builder: _Recording) -> list[str]:
    return [e.type for e in builder.out]


# Indices -----------------------------------------------------------------------------------


def test_indices_are_dense_in_order_of_first_appearance() -> None:
    b, _ = _builder()
    b.start("msg_1", "claude-x")
    b.thinking(7, "hmm")  # provider keys are the builder's business only
    b.text("t", "hello")
    b.text("t", " there")
    b.tool_start(("tool", 3), "toolu_1", "search")
    b.tool_input(("tool", 3), '{"q": 1}')
    b.redacted_thinking(99, "opaque")
    b.text(0, "bye")
    b.finish()
    assert [e.content_block_index for e in b.out if hasattr(e, "content_block_index")] == [
        0,
        1,
        1,
        2,
        2,
        2,  # tool.use_end, emitted when the redacted block opened
        3,
        4,
    ]
    content = _complete(b).final_content
    assert [blk.type for blk in content] == [
        "thinking",
        "text",
        "tool_use",
        "redacted_thinking",
        "text",
    ]
    _valid(b.out)


def test_message_start_comes_first_once_even_when_implicit() -> None:
    b, _ = _builder()
    b.text(0, "hi")
    b.start("msg_late", "claude-x")  # providers may name the message after it began
    b.finish()
    assert isinstance(b.out[0], MessageStart)
    assert sum(isinstance(e, MessageStart) for e in b.out) == 1
    assert _complete(b).message_id == "msg_late"
    assert _complete(b).model == "claude-x"
    _valid(b.out)


def test_start_keeps_the_first_id_and_model() -> None:
    b, _ = _builder()
    b.start("msg_1", "m1")
    b.start("msg_2", "m2")
    b.finish()
    assert b.out[0] == MessageStart("msg_1", "m1")
    assert (_complete(b).message_id, _complete(b).model) == ("msg_1", "m1")


# Tools -------------------------------------------------------------------------------------


def test_a_new_block_closes_an_open_tool_with_its_parsed_input() -> None:
    b, warns = _builder()
    b.tool_start(0, "toolu_1", "search")
    b.tool_input(0, '{"q": "x",')
    b.tool_input(0, ' "n": 2}')
    b.text(1, "done")
    assert _kinds(b) == [
        "message.start",
        "tool.use_start",
        "tool.use_input_delta",
        "tool.use_input_delta",
        "tool.use_end",
        "text.delta",
    ]
    end = b.out[4]
    assert end == ToolUseEnd(0, "toolu_1", "search", {"q": "x", "n": 2})
    assert b.out[5] == TextDelta(1, "done")
    assert warns.calls == []


def test_input_deltas_carry_the_raw_fragments() -> None:
    # docs/contract.md §2: partial_json is the provider's fragment exactly as received.
    b, _ = _builder()
    b.tool_start(0, "toolu_1", "t")
    fragments = ['{"pa', 'th": "a', '.txt"', "}"]
    for fragment in fragments:
        b.tool_input(0, fragment)
    b.finish()
    assert [e.partial_json for e in b.out if isinstance(e, ToolUseInputDelta)] == fragments


def test_an_empty_fragment_makes_no_event() -> None:
    b, _ = _builder()
    b.tool_start(0, "toolu_1", "t")
    b.tool_input(0, "")
    b.close(0)
    b.text(1, "Done.")  # the reply went on: the call was whole (a tool of no arguments)
    assert _kinds(b) == ["message.start", "tool.use_start", "tool.use_end", "text.delta"]
    assert b.out[2] == ToolUseEnd(0, "toolu_1", "t", {})


def test_text_after_a_tool_opens_a_new_block_at_a_higher_index() -> None:
    b, _ = _builder()
    b.text("txt", "before ")
    b.tool_start("tool", "toolu_1", "t")
    b.text("txt", "after")  # same provider key as the first text
    b.finish()
    content = _complete(b).final_content
    assert content == [
        TextBlock(text="before "),
        ToolUseBlock(id="toolu_1", name="t"),
        TextBlock(text="after"),
    ]
    assert [e.content_block_index for e in b.out if isinstance(e, TextDelta)] == [0, 2]
    _valid(b.out)


def test_close_ends_a_tool_and_is_a_no_op_for_other_blocks() -> None:
    b, _ = _builder()
    b.text(0, "a")
    b.close(0)
    b.close("never-opened")
    b.tool_start(1, "toolu_1", "t")
    b.tool_input(1, "{}")
    b.close(1)
    b.close(1)  # a second close does nothing
    b.tool_end(1)  # nor does an end after it
    b.finish()
    assert sum(isinstance(e, ToolUseEnd) for e in b.out) == 1
    _valid(b.out)


def test_authoritative_final_input_wins() -> None:
    b, warns = _builder()
    b.tool_start(0, "toolu_1", "t")
    b.tool_input(0, '{"q": "stale"')
    b.tool_end(0, {"q": "given", "n": [1, 2]})
    b.finish()
    end = next(e for e in b.out if isinstance(e, ToolUseEnd))
    assert end.final_input == {"q": "given", "n": [1, 2]}
    [tool] = _complete(b).final_content
    assert tool == ToolUseBlock(id="toolu_1", name="t", input={"q": "given", "n": [1, 2]})
    assert tool.provider_raw is None
    assert warns.calls == []


def test_tool_input_that_is_not_json_is_kept_raw_and_marked() -> None:
    b, warns = _builder()
    b.tool_start(0, "toolu_1", "shell")
    b.tool_input(0, "ls -la; echo 'not json'")
    b.close(0)
    b.finish()
    end = next(e for e in b.out if isinstance(e, ToolUseEnd))
    assert end.final_input == {} and end.input_error == INVALID_ARGUMENTS
    [tool] = _complete(b).final_content
    assert isinstance(tool, ToolUseBlock)
    assert tool.input == {} and tool.input_error == INVALID_ARGUMENTS
    assert tool.provider_raw == ProviderRaw(
        provider=PROVIDER, model=MODEL, data={"arguments": "ls -la; echo 'not json'"}
    )
    assert warns.calls == []  # data, not a report: the reader logs it (test_response_reader)
    _valid(b.out)


@pytest.mark.parametrize(
    ("raw", "partial"),
    [
        ('{"path": "a.txt", "limit": 1', {"path": "a.txt"}),
        ('{"a": 1} trailing', {"a": 1}),
        ("[1, 2]", {}),
        ('"just a string"', {}),
    ],
)
def test_unparseable_input_keeps_what_parses_and_the_raw_string(
    raw: str, partial: dict[str, Any]
) -> None:
    b, warns = _builder()
    b.tool_start(0, "toolu_1", "t")
    b.tool_input(0, raw)
    b.close(0)
    b.finish()
    [tool] = _complete(b).final_content
    assert isinstance(tool, ToolUseBlock)
    assert tool.input == partial and tool.input_error == INVALID_ARGUMENTS
    assert tool.provider_raw is not None and tool.provider_raw.data == {"arguments": raw}
    assert warns.calls == []


@pytest.mark.parametrize("kind", [StopKind.CANCELLED, StopKind.ERROR])
def test_an_abrupt_finish_closes_an_open_tool_with_partial_input(kind: StopKind) -> None:
    # docs/contract.md §2: the stream invariants.
    b, warns = _builder()
    b.text(0, "let me look")
    b.tool_start(1, "toolu_1", "read")
    b.tool_input(1, '{"path": "a.txt", "lim')
    b.finish(StopReason(kind=kind))
    assert _kinds(b)[-2:] == ["tool.use_end", "message.complete"]
    end = b.out[-2]
    cut = "the reply ended before the arguments were complete"
    assert end == ToolUseEnd(1, "toolu_1", "read", {"path": "a.txt"}, cut)
    complete = _complete(b)
    assert complete.stop_reason.kind is kind
    assert complete.final_content[0] == TextBlock(text="let me look")
    tool = complete.final_content[1]
    assert isinstance(tool, ToolUseBlock) and tool.input == {"path": "a.txt"}
    assert tool.provider_raw is not None
    assert tool.provider_raw.data == {"arguments": '{"path": "a.txt", "lim'}
    assert warns.calls == []  # truncation is what a cancelled stream is expected to leave
    _valid(b.out)


def test_a_cancelled_stop_noted_before_finish_counts_as_abrupt_too() -> None:
    b, warns = _builder()
    b.tool_start(0, "toolu_1", "read")
    b.tool_input(0, '{"path": "a')
    b.stop(StopReason(kind=StopKind.CANCELLED))
    b.finish()
    assert _complete(b).stop_reason.kind is StopKind.CANCELLED
    cut = "the reply ended before the arguments were complete"
    assert b.out[-2] == ToolUseEnd(0, "toolu_1", "read", {}, cut)
    assert warns.calls == []


def test_a_normal_finish_with_an_open_tool_closes_it() -> None:
    b, warns = _builder()
    b.tool_start(0, "toolu_1", "read")
    b.tool_input(0, '{"path": "a.txt"}')
    b.stop(StopReason(kind=StopKind.TOOL_USE, raw="tool_use"))
    b.finish()
    assert b.out[-2] == ToolUseEnd(0, "toolu_1", "read", {"path": "a.txt"})
    assert _complete(b).stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="tool_use")
    assert warns.calls == []


def test_finish_is_idempotent() -> None:
    b, _ = _builder()
    b.text(0, "a")
    b.finish()
    events = list(b.out)
    b.finish()
    b.finish(StopReason(kind=StopKind.CANCELLED))
    assert b.out == events
    assert b.completed
    assert _complete(b).stop_reason.kind is StopKind.END_TURN


def test_an_empty_message_still_starts_and_completes() -> None:
    b, _ = _builder()
    b.finish()
    assert _kinds(b) == ["message.start", "message.complete"]
    assert _complete(b).final_content == []
    _valid(b.out)


def test_fragments_for_unknown_tools_warn_and_do_not_crash() -> None:
    b, warns = _builder()
    b.tool_input("nope", '{"a": 1}')
    b.text(0, "x")
    b.tool_input(0, '{"a": 1}')  # key 0 is a text block
    b.tool_start(1, "toolu_1", "t")
    b.tool_end(1, {})
    b.tool_input(1, '{"late": true}')  # after the tool ended
    b.tool_end("nope")
    b.finish()
    assert len(warns.calls) == 3
    assert all(args[0] == "tool_use" for args, _ in warns.calls)
    assert "ended" in warns.calls[2][0][1]
    assert not any(isinstance(e, ToolUseInputDelta) for e in b.out)
    _valid(b.out)


# Thinking ----------------------------------------------------------------------------------


def test_thinking_with_signature_becomes_a_signed_block_from_this_model() -> None:
    b, _ = _builder()
    b.thinking(0, "first, ")
    b.thinking(0, "second")
    b.thinking_signature(0, "sig-a")
    b.thinking_signature(0, "sig-b")
    b.text(1, "answer")
    b.finish()
    deltas = [e for e in b.out if isinstance(e, ThinkingDelta)]
    assert deltas == [
        ThinkingDelta(0, "first, "),
        ThinkingDelta(0, "second"),
        ThinkingDelta(0, "", signature="sig-a"),
        ThinkingDelta(0, "", signature="sig-b"),
    ]
    thinking, text = _complete(b).final_content
    assert thinking == ThinkingBlock(
        thinking="first, second",
        signature="sig-asig-b",
        provider_raw=ProviderRaw(provider=PROVIDER, model=MODEL),
    )
    assert text == TextBlock(text="answer")
    _valid(b.out)


def test_thinking_without_signature_has_none() -> None:
    b, _ = _builder()
    b.thinking("r", "reasoning")
    b.finish()
    [block] = _complete(b).final_content
    assert isinstance(block, ThinkingBlock)
    assert block.signature is None
    assert block.provider_raw == ProviderRaw(provider=PROVIDER, model=MODEL)


def test_redacted_thinking_becomes_a_redacted_block() -> None:
    b, _ = _builder()
    b.redacted_thinking(0, "opaque==")
    b.redacted_thinking(1, "more==")
    b.finish()
    assert [e for e in b.out if isinstance(e, ThinkingDelta)] == [
        ThinkingDelta(0, "", redacted_data="opaque=="),
        ThinkingDelta(1, "", redacted_data="more=="),
    ]
    origin = ProviderRaw(provider=PROVIDER, model=MODEL)
    assert _complete(b).final_content == [
        RedactedThinkingBlock(data="opaque==", provider_raw=origin),
        RedactedThinkingBlock(data="more==", provider_raw=origin),
    ]
    _valid(b.out)


# Usage and stop reason ---------------------------------------------------------------------


def test_usage_none_leaves_a_count_as_it_was() -> None:
    b, _ = _builder()
    reported_before = b.usage_reported
    b.usage(input_tokens=10, cached_input_tokens=3)
    b.usage(output_tokens=5)
    b.usage(output_tokens=7, cache_creation_input_tokens=2)
    b.usage()
    assert (reported_before, b.usage_reported) == (False, True)
    b.finish()
    assert _complete(b).usage == TokenUsage(
        input_tokens=10, output_tokens=7, cached_input_tokens=3, cache_creation_input_tokens=2
    )


def test_usage_zero_is_a_real_value() -> None:
    b, _ = _builder()
    b.usage(input_tokens=10)
    b.usage(input_tokens=0)
    assert b.token_usage().input_tokens == 0


def test_no_usage_is_all_zero() -> None:
    b, _ = _builder()
    b.finish()
    assert _complete(b).usage == TokenUsage()
    assert not b.usage_reported


def test_the_stop_reason_defaults_to_end_turn_and_finish_overrides_stop() -> None:
    b, _ = _builder()
    b.finish()
    assert _complete(b).stop_reason == StopReason(kind=StopKind.END_TURN)
    b2, _ = _builder()
    b2.stop(StopReason(kind=StopKind.MAX_TOKENS, raw="length"))
    b2.finish(StopReason(kind=StopKind.ERROR, raw="overloaded"))
    assert _complete(b2).stop_reason == StopReason(kind=StopKind.ERROR, raw="overloaded")


def test_has_block_knows_the_keys_seen() -> None:
    b, _ = _builder()
    assert not b.has_block(0)
    b.text(0, "a")
    assert b.has_block(0) and not b.has_block(1)


def test_kept_raw_fields_reach_the_final_content_however_the_message_ends() -> None:
    for stop in (StopKind.END_TURN, StopKind.ERROR, StopKind.CANCELLED):
        b, _ = _builder()
        b.text(0, "a")
        b.keep_raw(0, {"sig": "t1"})
        b.thinking(1, "hmm")
        b.keep_raw(1, {"id": "rs_1"})
        b.tool_start(2, "call_1", "f")
        b.keep_raw(2, {})  # empty: still marks the block as this provider's own
        b.tool_input(2, '{"x": 1, "y')
        assert b.has_raw(0) and b.has_raw(2) and not b.has_raw(3)
        b.finish(StopReason(kind=stop, raw=None))
        final = b.out[-1]
        assert isinstance(final, MessageComplete)
        text, thinking, tool = final.final_content
        assert text.provider_raw == ProviderRaw(provider=PROVIDER, model=MODEL, data={"sig": "t1"})
        assert thinking.provider_raw is not None
        assert thinking.provider_raw.data == {"id": "rs_1"}
        assert isinstance(tool, ToolUseBlock) and tool.provider_raw is not None
        assert tool.input == {"x": 1}
        assert tool.provider_raw.data == {"arguments": '{"x": 1, "y'}  # cut off: kept raw too
        assert tool.input_error is not None  # and marked


def test_blocks_without_kept_fields_have_no_provider_raw() -> None:
    b, _ = _builder()
    b.text(0, "a")
    b.tool_start(1, "call_1", "f")
    b.tool_input(1, "{}")
    b.finish()
    final = b.out[-1]
    assert isinstance(final, MessageComplete)
    assert [block.provider_raw for block in final.final_content] == [None, None]


# Every sequence of builder calls gives a stream that keeps the invariants ------------------


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.integers(0, 3), st.text(max_size=5)),
        st.tuples(st.just("thinking"), st.integers(0, 3), st.text(max_size=5)),
        st.tuples(st.just("signature"), st.integers(0, 3), st.text(min_size=1, max_size=5)),
        st.tuples(st.just("redacted"), st.integers(0, 3), st.text(min_size=1, max_size=5)),
        st.tuples(st.just("tool_start"), st.integers(0, 3), st.sampled_from(["a", "b"])),
        st.tuples(
            st.just("tool_input"), st.integers(0, 3), st.sampled_from(['{"a"', ": 1", "}", "x"])
        ),
        st.tuples(st.just("tool_end"), st.integers(0, 3), st.none()),
        st.tuples(st.just("close"), st.integers(0, 3), st.none()),
        st.tuples(st.just("usage"), st.integers(0, 3), st.integers(0, 100)),
    ),
    max_size=30,
)


@settings(deadline=None)
@given(ops=_ops, stop=st.sampled_from([None, *StopKind]))
def test_any_sequence_of_calls_keeps_the_stream_invariants(
    ops: list[tuple[str, int, Any]], stop: StopKind | None
) -> None:
    b = _Recording(PROVIDER, MODEL)
    tool_ids = 0
    for op, key, arg in ops:
        if op == "text":
            b.text(key, arg)
        elif op == "thinking":
            b.thinking(key, arg)
        elif op == "signature":
            b.thinking_signature(key, arg)
        elif op == "redacted":
            b.redacted_thinking(key, arg)
        elif op == "tool_start":
            tool_ids += 1
            b.tool_start(key, f"toolu_{tool_ids}", arg)
        elif op == "tool_input":
            b.tool_input(key, arg)
        elif op == "tool_end":
            b.tool_end(key)
        elif op == "close":
            b.close(key)
        else:
            b.usage(output_tokens=arg)
    b.finish(None if stop is None else StopReason(kind=stop))
    _valid(b.out)
    complete = _complete(b)
    assert all(isinstance(e, StreamEvent) for e in b.out)
    assert sum(isinstance(e, MessageComplete) for e in b.out) == 1
    starts = [e.tool_use_id for e in b.out if isinstance(e, ToolUseStart)]
    ends = [e.tool_use_id for e in b.out if isinstance(e, ToolUseEnd)]
    assert starts == ends
    assert [blk.id for blk in complete.final_content if isinstance(blk, ToolUseBlock)] == starts


def test_arguments_that_are_not_json_keep_the_call_marked_with_its_raw_text() -> None:
    b, warns = _builder()
    b.tool_start(0, "call_1", "get_weather")
    b.tool_input(0, "{'city': 'Paris'}")  # Python's repr, not JSON
    b.tool_start(1, "call_2", "get_time")
    b.tool_input(1, '{"tz": "UTC"}')
    b.finish()
    final = b.out[-1]
    assert isinstance(final, MessageComplete)
    bad, good = final.final_content
    assert isinstance(bad, ToolUseBlock) and isinstance(good, ToolUseBlock)
    assert bad.input == {} and bad.input_error == "the arguments are not a JSON object"
    assert bad.provider_raw is not None
    assert bad.provider_raw.data == {"arguments": "{'city': 'Paris'}"}
    assert good.input == {"tz": "UTC"} and good.input_error is None
    assert warns.calls == []  # data on the events: the reader reports it (test_response_reader)
    ends = [e for e in b.out if isinstance(e, ToolUseEnd)]
    assert [e.input_error for e in ends] == ["the arguments are not a JSON object", None]


def test_cut_off_arguments_are_marked_as_cut_off() -> None:
    b, warns = _builder()
    b.tool_start(0, "call_1", "f")
    b.tool_input(0, '{"a": 1, "b": "tru')
    b.finish(StopReason(kind=StopKind.CANCELLED, raw=None))
    final = b.out[-1]
    assert isinstance(final, MessageComplete)
    (tool,) = final.final_content
    assert isinstance(tool, ToolUseBlock) and tool.input == {"a": 1}
    assert tool.input_error == "the reply ended before the arguments were complete"
    assert warns.calls == []


# Pulling events; the usage estimate --------------------------------------------------------


def test_take_hands_out_each_event_once_in_the_order_made() -> None:
    b = MessageBuilder(PROVIDER, MODEL)
    assert b.take() == ()
    b.text(0, "a")
    b.text(0, "b")
    assert b.take() == [MessageStart(None, None), TextDelta(0, "a"), TextDelta(0, "b")]
    assert b.take() == ()
    b.tool_start(1, "toolu_1", "f")  # ends nothing, opens a block
    b.finish()
    events = b.take()
    assert [e.type for e in events] == ["tool.use_start", "tool.use_end", "message.complete"]
    assert b.take() == ()


@settings(deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["text", "thinking", "tool"]),
            st.integers(0, 2),
            st.sampled_from(["a", "é", "\ud83d", "\ude00", "", "{}"]),
        ),
        max_size=12,
    )
)
def test_take_text_is_text_then_take(ops: list[tuple[str, int, str]]) -> None:
    """The hot path's one call gives what its two calls give, whatever came before."""
    one, two = MessageBuilder(PROVIDER, MODEL), MessageBuilder(PROVIDER, MODEL)
    for builder_ in (one, two):
        builder_.start("m", "x")
    for op, key, text in ops:
        if op == "text":
            got = one.take_text(key, text)
            two.text(key, text)
            assert list(got) == list(two.take())
        else:
            for builder_ in (one, two):
                if op == "thinking":
                    builder_.thinking(key, text)
                else:
                    builder_.tool_start(key, f"toolu_{key}", "f")
    one.finish()
    two.finish()
    assert list(one.take()) == list(two.take())


def test_usage_is_estimated_only_when_the_provider_reported_none() -> None:
    asked: list[str] = []

    def input_tokens() -> int:
        asked.append("input")
        return 7

    b, _ = _builder(estimate_input_tokens=input_tokens)
    b.text(0, "x" * 40)  # 10 tokens at four characters a token
    b.finish()
    usage = _complete(b).usage
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (7, 10, True)
    assert asked == ["input"]
    reported, _ = _builder(estimate_input_tokens=input_tokens)
    reported.text(0, "x" * 40)
    reported.usage(input_tokens=3, output_tokens=2)
    reported.finish()
    usage = _complete(reported).usage
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (3, 2, False)
    assert asked == ["input"]


def test_a_server_tool_block_with_a_lone_surrogate_is_cleaned_like_any_text() -> None:
    """A JSON ``\\ud800`` escape alone decodes to a str no UTF-8 can hold: in a server tool's
    input, as in text, it becomes U+FFFD, so the event and the reply encode."""
    from metis.model.server_tools import ServerToolCallBlock

    b = MessageBuilder(PROVIDER, MODEL)
    b.server_tool(0, ServerToolCallBlock(id="srvtoolu_1", name="x", input={"q": "a" + chr(0xD800)}))
    b.finish()
    events = b.take()
    call = events[-2]
    assert call.to_dict()["block"]["input"] == {"q": "a\ufffd"}  # type: ignore[union-attr]
    json.dumps([e.to_dict() for e in events], ensure_ascii=False).encode()


def test_what_a_signature_is_sent_back_with_is_cleaned_of_lone_surrogates() -> None:
    """A Responses reasoning item's id rides with its signature (``provider_data``): a lone
    ``\\ude00`` escape in it becomes U+FFFD, so the event and the reply encode."""
    b = MessageBuilder(PROVIDER, MODEL)
    b.thinking_signature(0, "sig", {"id": chr(0xDE00) + " head"})
    b.finish()
    events = b.take()
    (delta,) = [e for e in events if isinstance(e, ThinkingDelta)]
    assert delta.provider_data == {"id": "\ufffd head"}
    json.dumps([e.to_dict() for e in events], ensure_ascii=False).encode()
