"""What compatible Chat Completions servers send their own way: Mistral's typed content chunks,
OpenRouter's ``reasoning_details``, tool calls without ids, cache writes in usage, and
``finish_reason: "stop"`` for a forced tool call. Sans-IO: no network, no event loop."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.errors import AdapterError, ErrorClass, ProtocolError
from metis.model.content import (
    ContentBlock,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.events import MessageComplete, StreamEvent, TextDelta, ThinkingDelta
from metis.model.response import StopKind, StopReason
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat import codec
from metis.wire.openai_chat.read import content_chunks


def builder(warnings: list[tuple[str, str]] | None = None) -> MessageBuilder:
    def warn(block_type: str, reason: str, **_: Any) -> None:
        if warnings is not None:
            warnings.append((block_type, reason))

    return MessageBuilder("mistral", "mistral:magistral-medium-latest", warn)


def stream(
    chunks: list[dict[str, Any]], warnings: list[tuple[str, str]] | None = None
) -> list[StreamEvent]:
    parser = codec.stream_parser(builder(warnings))
    events = [event for obj in chunks for event in parser.feed(obj)]
    return [*events, *parser.end()]


def parse(body: dict[str, Any]) -> MessageComplete:
    last = codec.parse_body(body, builder())[-1]
    assert isinstance(last, MessageComplete)
    return last


def final(events: list[StreamEvent]) -> MessageComplete:
    last = events[-1]
    assert isinstance(last, MessageComplete)
    return last


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "cmpl-1", "model": "magistral-medium-2509", "choices": [choice], **extra}


def body(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    return {"id": "cmpl-1", "model": "m", "choices": [choice], **extra}


# Mistral: content as a list of chunks (docs.mistral.ai, reasoning: ThinkChunk and TextChunk)

MAGISTRAL_THINK = {
    "type": "thinking",
    "thinking": [
        {"type": "text", "text": "The user asks for 2+2. "},
        {"type": "text", "text": "4."},
    ],
}


def test_body_content_chunks_become_thinking_then_text() -> None:
    done = parse(body({"content": [MAGISTRAL_THINK, {"type": "text", "text": "2 + 2 = 4"}]}))
    assert done.final_content == [
        ThinkingBlock(
            thinking="The user asks for 2+2. 4.", provider_raw=done.final_content[0].provider_raw
        ),
        TextBlock(text="2 + 2 = 4"),
    ]


def test_streamed_content_chunks_become_thinking_and_text_deltas() -> None:
    events = stream(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk(
                {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Hmm"}]}]}
            ),
            chunk(
                {
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": ", four."}]}
                    ]
                }
            ),
            chunk({"content": [{"type": "text", "text": "Four"}]}),
            chunk({"content": "."}, "stop"),
        ]
    )
    thinking = [e.thinking for e in events if isinstance(e, ThinkingDelta)]
    text = [e.text for e in events if isinstance(e, TextDelta)]
    assert thinking == ["Hmm", ", four."] and text == ["Four", "."]
    content = final(events).final_content
    assert [type(b) for b in content] == [ThinkingBlock, TextBlock]
    assert content[0].thinking == "Hmm, four." and content[1].text == "Four."  # type: ignore[union-attr]


def test_unknown_content_chunk_is_kept_whole_with_no_warning() -> None:
    warnings: list[tuple[str, str]] = []
    reference = {"type": "reference", "reference_ids": [1]}
    events = stream(
        [chunk({"content": [reference, {"type": "text", "text": "ok"}]}, "stop")], warnings
    )
    kept, text = final(events).final_content
    assert text == TextBlock(text="ok") and warnings == []
    assert isinstance(kept, OpaqueBlock) and kept.kind == "reference"
    assert kept.provider_raw.data == {"item": reference, "place": "content"}


def test_content_as_a_json_object_is_read_as_its_json_text() -> None:
    """Cloudflare Workers AI answers a ``json_schema`` request with the object itself where
    OpenAI sends its JSON as a string."""
    done = parse(body({"content": {"city": "Tromsø", "days": 3}, "refusal": None}))
    assert done.final_content == [TextBlock(text='{"city":"Tromsø","days":3}')]
    assert done.stop_reason.kind is StopKind.END_TURN


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": 3}],
        [{"type": "thinking", "thinking": 5}],
        [{"text": "no type"}],
        7,
    ],
)
def test_malformed_content_chunks_are_protocol_errors(content: Any) -> None:
    with pytest.raises(ProtocolError):
        parse(body({"content": content}))


def test_text_and_own_thinking_go_back_as_content_chunks() -> None:
    mine = ProviderRaw(provider="mistral", model="mistral:magistral-medium-latest")
    content: list[ContentBlock] = [
        ThinkingBlock(thinking="Hmm", provider_raw=mine),
        TextBlock(text="Four"),
        ThinkingBlock(thinking="from elsewhere"),
        ToolUseBlock(id="tu_1", name="f"),
        ThinkingBlock(thinking="", provider_raw=mine),
    ]
    chunks = content_chunks(content, lambda block: block.provider_raw == mine)
    assert chunks == [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm"}]},
        {"type": "text", "text": "Four"},
    ]
    done = parse(body({"content": chunks}))  # and they read back as what they were
    assert isinstance(done, MessageComplete)
    assert [
        (x.type, getattr(x, "thinking", getattr(x, "text", None))) for x in done.final_content
    ] == [
        ("thinking", "Hmm"),
        ("text", "Four"),
    ]


# OpenRouter: reasoning given only as reasoning_details (openrouter.ai/docs, reasoning tokens)


def test_reasoning_details_alone_become_thinking_with_signature() -> None:
    details = [
        {
            "type": "reasoning.text",
            "text": "Let me think.",
            "signature": "sig-1",
            "format": "anthropic-claude-v1",
            "index": 0,
        }
    ]
    done = parse(body({"content": "Hi", "reasoning_details": details}))
    thinking = done.final_content[0]
    assert isinstance(thinking, ThinkingBlock)
    assert (thinking.thinking, thinking.signature) == ("Let me think.", "sig-1")


def test_streamed_reasoning_summary_and_encrypted_details() -> None:
    events = stream(
        [
            chunk(
                {
                    "reasoning_details": [
                        {"type": "reasoning.summary", "summary": "Plan: ", "index": 0}
                    ]
                }
            ),
            chunk(
                {
                    "reasoning_details": [
                        {"type": "reasoning.summary", "summary": "add.", "index": 0}
                    ]
                }
            ),
            chunk(
                {
                    "reasoning_details": [
                        {"type": "reasoning.encrypted", "data": "gAAAA", "index": 1}
                    ]
                }
            ),
            chunk({"content": "4"}, "stop"),
        ]
    )
    content = final(events).final_content
    assert isinstance(content[0], ThinkingBlock) and content[0].thinking == "Plan: add."
    assert isinstance(content[1], RedactedThinkingBlock) and content[1].data == "gAAAA"
    assert content[2] == TextBlock(text="4")


def test_streamed_reasoning_with_details_keeps_the_text_once_and_the_signature() -> None:
    # OpenRouter in front of Claude: `reasoning` and `reasoning_details` carry the same text;
    # the signature comes last, in details only.
    events = stream(
        [
            chunk(
                {
                    "reasoning": "Think",
                    "reasoning_details": [{"type": "reasoning.text", "text": "Think", "index": 0}],
                }
            ),
            chunk(
                {
                    "reasoning": "ing.",
                    "reasoning_details": [{"type": "reasoning.text", "text": "ing.", "index": 0}],
                }
            ),
            chunk(
                {"reasoning_details": [{"type": "reasoning.text", "signature": "EqQB", "index": 0}]}
            ),
            chunk({"content": "Done."}, "stop"),
        ]
    )
    thinking, text = final(events).final_content
    assert isinstance(thinking, ThinkingBlock)
    assert (thinking.thinking, thinking.signature) == ("Thinking.", "EqQB")
    assert text == TextBlock(text="Done.")


def test_reasoning_text_wins_over_its_details() -> None:
    details = [{"type": "reasoning.text", "text": "same thought"}]
    done = parse(body({"content": "x", "reasoning": "same thought", "reasoning_details": details}))
    assert [b.type for b in done.final_content] == ["thinking", "text"]
    assert done.final_content[0].thinking == "same thought"  # type: ignore[union-attr]


# GitHub Copilot: reasoning in reasoning_text, its signature in reasoning_opaque


def test_copilot_reasoning_text_and_opaque_are_thinking_and_its_signature() -> None:
    message = {
        "content": "Done.",
        "reasoning_text": "Look it up first.",
        "reasoning_opaque": "c2ln",
    }
    thinking, text = parse(body(message)).final_content
    assert isinstance(thinking, ThinkingBlock) and text == TextBlock(text="Done.")
    assert (thinking.thinking, thinking.signature) == ("Look it up first.", "c2ln")


def test_copilot_streamed_reasoning_text_and_opaque_are_kept() -> None:
    call = {"index": 0, "id": "call_7", "type": "function"}
    call["function"] = {"name": "find", "arguments": '{"q": "notes"}'}
    events = stream(
        [
            chunk({"role": "assistant", "content": None, "reasoning_text": "Search, "}),
            chunk({"role": "assistant", "content": None, "reasoning_text": "then read."}),
            chunk({"tool_calls": [call], "reasoning_opaque": "b3BhcXVl"}, "tool_calls"),
        ]
    )
    thinking, used = final(events).final_content
    assert isinstance(thinking, ThinkingBlock) and isinstance(used, ToolUseBlock)
    assert (thinking.thinking, thinking.signature) == ("Search, then read.", "b3BhcXVl")
    assert used.input == {"q": "notes"}


# Tool calls without an id get one


@pytest.mark.parametrize("tool_id", [None, ""])
def test_body_tool_call_without_id_gets_a_minted_id(tool_id: str | None) -> None:
    call = {
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    if tool_id is not None:
        call["id"] = tool_id
    done = parse(body({"content": None, "tool_calls": [call, dict(call)]}, "tool_calls"))
    tools = [b for b in done.final_content if isinstance(b, ToolUseBlock)]
    assert len(tools) == 2 and all(t.id.startswith("call_") and len(t.id) > 5 for t in tools)
    assert tools[0].id != tools[1].id and tools[0].input == {"city": "Paris"}


def test_body_tool_call_id_that_is_a_number_is_read_as_its_digits() -> None:
    """Text Generation Inference 1.4 (huggingface/huggingface_hub's recordings) numbered its
    calls and sent their arguments as an object; the reply crashed on the id."""
    call = {"id": 2, "type": "function", "function": {"name": "f", "arguments": {"unit": "c"}}}
    done = parse(body({"content": None, "tool_calls": [call]}, "eos_token"))
    (tool,) = done.final_content
    assert isinstance(tool, ToolUseBlock) and (tool.id, tool.input) == ("2", {"unit": "c"})
    for odd in (2.5, True, ["x"]):
        with pytest.raises(ProtocolError, match=r"tool_calls\[\]\.id"):
            parse(body({"content": None, "tool_calls": [{**call, "id": odd}]}, "tool_calls"))


def test_streamed_tool_call_without_id_gets_one_id_for_all_its_fragments() -> None:
    events = stream(
        [
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
            chunk({}, "tool_calls"),
        ]
    )
    (tool,) = final(events).final_content
    assert isinstance(tool, ToolUseBlock) and tool.id.startswith("call_") and tool.input == {"a": 1}


# Forced tool choice: finish_reason "stop" with tool calls


def test_forced_tool_call_with_finish_stop_is_tool_use() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    done = parse(body({"content": None, "tool_calls": [call]}, "stop"))
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.TOOL_USE, "stop")
    events = stream([chunk({"tool_calls": [{"index": 0, **call}]}), chunk({}, "stop")])
    assert (final(events).stop_reason.kind, final(events).stop_reason.raw) == (
        StopKind.TOOL_USE,
        "stop",
    )


def test_finish_stop_without_tool_calls_stays_end_turn() -> None:
    done = parse(body({"content": "hi"}, "stop"))
    assert done.stop_reason.kind is StopKind.END_TURN


# Cache writes in usage


def test_cache_write_tokens_become_cache_creation_tokens() -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300},
    }
    done = parse(body({"content": "hi"}, usage=usage))
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (100, 600)
    assert done.usage.cache_creation_input_tokens == 300
    assert done.usage.total_input_tokens == 1000
    events = stream(
        [chunk({"content": "x"}, "stop"), {"id": "cmpl-1", "choices": [], "usage": usage}]
    )
    assert final(events).usage == done.usage


def test_deepseeks_cache_hits_are_cache_reads_streamed_and_whole() -> None:
    """DeepSeek reports its cache as ``prompt_cache_hit_tokens`` (and misses), inside
    ``prompt_tokens``."""
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 5,
        "prompt_cache_hit_tokens": 768,
        "prompt_cache_miss_tokens": 232,
    }
    done = parse(body({"content": "hi"}, usage=usage))
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (232, 768)
    events = stream(
        [chunk({"content": "x"}, "stop"), {"id": "cmpl-1", "choices": [], "usage": usage}]
    )
    assert final(events).usage == done.usage


@pytest.mark.parametrize(
    "cache",
    [
        {"num_cached_tokens": 768},
        {"prompt_token_details": {"cached_tokens": 768}},
        {"prompt_tokens_details": {"cached_tokens": 768}},
    ],
    ids=["num_cached_tokens", "prompt_token_details", "prompt_tokens_details"],
)
def test_mistrals_cache_hits_are_cache_reads_in_each_of_its_fields(cache: dict[str, Any]) -> None:
    """Mistral's usage counts cached prompt tokens as ``num_cached_tokens`` (its API reference)
    or under ``prompt_token_details`` / ``prompt_tokens_details`` (the fields vercel/ai#14889
    reads, after #14382: every token was read as uncached), inside ``prompt_tokens``."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 5, **cache}
    done = parse(body({"content": "hi"}, usage=usage))
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (232, 768)
    events = stream(
        [chunk({"content": "x"}, "stop"), {"id": "cmpl-1", "choices": [], "usage": usage}]
    )
    assert final(events).usage == done.usage


@pytest.mark.parametrize(
    ("completion", "total", "output"),
    [(2, 12 + 2 + 340, 342), (342, 12 + 342, 342), (342, None, 342), (2, 12 + 2, 342)],
    ids=["reasoning-apart", "reasoning-inside", "no-total", "reasoning-beyond-completion"],
)
def test_reasoning_left_out_of_completion_tokens_is_added_where_the_total_shows_it(
    completion: int, total: int | None, output: int
) -> None:
    """A server relaying Grok's usage (an OpenRouter-style proxy, a compatible endpoint) counts
    its reasoning apart from ``completion_tokens``, as xAI does: ``total_tokens`` is prompt +
    completion + reasoning. OpenAI's total is prompt + completion, the reasoning inside.
    Reasoning beyond ``completion_tokens`` cannot be inside it, whatever the total says: Vercel's
    AI Gateway relaying Gemini 2.5 Flash counted 2 completion and 23 reasoning tokens with a
    total of prompt + 2, and charged for 25 output tokens."""
    usage: dict[str, Any] = {
        "prompt_tokens": 12,
        "completion_tokens": completion,
        "completion_tokens_details": {"reasoning_tokens": 340},
    }
    if total is not None:
        usage["total_tokens"] = total
    done = parse(body({"content": "hi"}, usage=usage))
    assert (done.usage.output_tokens, done.usage.reasoning_tokens) == (output, 340)
    events = stream(
        [chunk({"content": "x"}, "stop"), {"id": "cmpl-1", "choices": [], "usage": usage}]
    )
    assert final(events).usage == done.usage


def test_groqs_usage_in_x_groq_is_read_not_estimated() -> None:
    """Groq gives a stream's usage in ``x_groq.usage`` on its finish_reason chunk (with its
    timings) where no ``stream_options`` asked for a usage chunk."""
    groq = {"id": "req_1", "usage": {"queue_time": 0.28, "prompt_tokens": 18,
                                     "completion_tokens": 73, "total_tokens": 91}}  # fmt: skip
    events = stream(
        [
            chunk({"role": "assistant", "content": ""}, x_groq={"id": "req_1"}),
            chunk({"content": "Hello"}),
            chunk({}, "stop", x_groq=groq),
        ]
    )
    usage = final(events).usage
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (18, 73, False)


def test_a_reply_its_content_filter_left_without_a_message_is_a_content_filter_stop() -> None:
    """Azure's content filter answers 200 with a choice that has no ``message`` at all, only
    ``finish_reason: "content_filter"`` and the filter's results."""
    filtered = {
        "id": "cmpl-1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "content_filter",
                "content_filter_results": {"hate": {"filtered": True, "severity": "high"}},
            }
        ],
        "usage": {"prompt_tokens": 15, "completion_tokens": 19},
    }
    done = parse(filtered)
    assert done.final_content == []
    assert (done.stop_reason.kind, done.stop_reason.raw) == (
        StopKind.CONTENT_FILTER,
        "content_filter",
    )
    assert (done.usage.input_tokens, done.usage.output_tokens) == (15, 19)


@pytest.mark.parametrize(
    ("error", "cls", "status"),
    [
        (  # Azure's refused prompt, in a 200 body
            {"message": "The response was filtered", "type": None, "param": "prompt",
             "code": "content_filter", "status": 400},
            ErrorClass.INVALID_REQUEST,
            400,
        ),
        ({"message": "Rate limited upstream", "code": 429}, ErrorClass.RATE_LIMIT, 429),
        ({"message": "Upstream failed", "code": 502}, ErrorClass.SERVER_ERROR, 502),
        ({"message": "no status", "code": "weird"}, ErrorClass.SERVER_ERROR, None),
    ],
    ids=["azure-status", "numeric-code-429", "numeric-code-502", "none"],
)  # fmt: skip
def test_an_error_object_in_a_200_reply_is_classified_by_its_own_status(
    error: dict[str, Any], cls: ErrorClass, status: int | None
) -> None:
    """An error object in a 200 body or a stream chunk that says its status (Azure's
    ``error.status``, OpenRouter's numeric ``error.code``) is classified by it: a refused
    prompt is not a server error to retry."""
    for read in (lambda obj: parse(obj), lambda obj: stream([obj])):
        with pytest.raises(AdapterError) as caught:
            read({"error": error})
        assert caught.value.error_class is cls
        assert caught.value.provider_status == status
        assert caught.value.provider_message == error["message"]


def test_an_error_chunk_keeps_the_usage_it_carries() -> None:
    """OpenRouter ends a stream cut at its token limit with an error chunk that carries the
    call's usage: the error is raised, the usage is kept with what arrived."""
    parser = codec.stream_parser(builder())
    parser.feed(chunk({"role": "assistant", "content": "Hel"}))
    parser.feed(chunk({"content": "lo"}, "length"))
    usage = {"prompt_tokens": 43, "completion_tokens": 10, "total_tokens": 53}
    with pytest.raises(AdapterError, match="Token limit reached"):
        parser.feed(
            chunk(
                {"content": ""}, error={"code": 400, "message": "Token limit reached"}, usage=usage
            )
        )
    ended = final(list(parser.interrupt(StopReason(kind=StopKind.ERROR))))
    assert ended.final_content[0].text == "Hello"  # type: ignore[union-attr]
    assert (ended.usage.input_tokens, ended.usage.output_tokens) == (43, 10)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_togethers_eos_finish_is_the_end_of_the_turn(streamed: bool) -> None:
    """Together AI ends a reply with ``finish_reason: "eos"`` (end of sequence)."""
    if streamed:
        done = final(stream([chunk({"role": "assistant", "content": "Hi."}), chunk({}, "eos")]))
    else:
        done = parse(body({"content": "Hi."}, finish="eos"))
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.END_TURN, "eos")


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_a_tool_call_finish_with_calls_is_a_tool_use_stop(streamed: bool) -> None:
    """Azure AI Foundry serving DeepSeek-R1-0528 ends a reply that calls a tool with
    ``finish_reason: "tool_call"`` (singular), its calls in ``tool_calls`` as usual."""
    call = {"id": "call_w1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    if streamed:
        done = final(
            stream([chunk({"tool_calls": [{"index": 0, **call}]}), chunk({}, "tool_call")])
        )
    else:
        done = parse(body({"content": "Checking.", "tool_calls": [call]}, finish="tool_call"))
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.TOOL_USE, "tool_call")
    assert [b.name for b in done.final_content if isinstance(b, ToolUseBlock)] == ["weather"]


@pytest.mark.parametrize("finish", ["tool_calls", "tool_call", "function_call"])
def test_a_tool_call_finish_without_a_call_is_the_end_of_the_turn(finish: str) -> None:
    """OpenRouter answered a structured request with its JSON as content and
    ``finish_reason: "tool_calls"``, no call in the reply: nothing to run."""
    done = parse(body({"content": '{"topic": "Ruby"}'}, finish=finish))
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.END_TURN, finish)
    streamed = final(stream([chunk({"content": '{"topic": "Ruby"}'}), chunk({}, finish)]))
    assert streamed.stop_reason == done.stop_reason


def test_an_end_turn_finish_is_the_end_of_the_turn() -> None:
    """OpenRouter relaying Anthropic once passed its ``end_turn`` on as the finish_reason."""
    done = parse(body({"content": "Done."}, finish="end_turn"))
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.END_TURN, "end_turn")


def test_no_warning_is_logged_for_plain_content(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parse(body({"content": [{"type": "text", "text": "plain"}]}))
    assert not caplog.records


# A prompt count that leaves the cached tokens out (Azure AI Foundry serving Grok: prompt 7,
# cached 161, total 8 = prompt + completion), as ruby_llm's recordings show


def test_cached_tokens_beyond_the_prompt_count_are_read_as_apart_from_it() -> None:
    usage = {
        "prompt_tokens": 7,
        "completion_tokens": 1,
        "total_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 161, "text_tokens": 7},
    }
    done = parse(body({"content": "Paris"}, usage=usage))
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (7, 161)
    assert done.usage.total_input_tokens == 168
    streamed = final(stream([chunk({"content": "Paris"}, "stop"), chunk({}, usage=usage)]))
    assert streamed.usage == done.usage


def test_cached_tokens_within_the_prompt_count_are_part_of_it() -> None:
    usage = {
        "prompt_tokens": 170,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 161},
    }
    done = parse(body({"content": "Paris"}, usage=usage))
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (9, 161)


def choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "finish_reason": finish}


def test_the_choice_read_is_the_lowest_index_wherever_it_stands() -> None:
    """A chunk carrying two choices with the second at index 0 lost that one's text, and a
    server numbering its one choice 1 lost the whole reply (a 'no finish_reason' error);
    a whole body read its first choice, whatever its index."""
    both = [
        {"id": "c", "choices": [choice(1, {"content": "other"}), choice(0, {"content": "Hel"})]},
        {"id": "c", "choices": [choice(0, {"content": "lo"}), choice(1, {"content": "!"})]},
        {"id": "c", "choices": [choice(1, {}, "stop"), choice(0, {}, "stop")]},
    ]
    one = [
        {"id": "c", "choices": [choice(1, {"content": "Hel"})]},
        {"id": "c", "choices": [choice(1, {"content": "lo"}, "stop")]},
    ]
    for chunks in (both, one):
        ended = final(stream(chunks))
        assert [block.text for block in ended.final_content] == ["Hello"]  # type: ignore[union-attr]
        assert ended.stop_reason.kind is StopKind.END_TURN
    whole = body({"content": "Hello"})
    whole["choices"].insert(
        0, {"index": 1, "message": {"content": "other"}, "finish_reason": "length"}
    )
    ended = parse(whole)
    assert [block.text for block in ended.final_content] == ["Hello"]  # type: ignore[union-attr]
    assert ended.stop_reason.kind is StopKind.END_TURN


def test_unnumbered_choices_are_pieces_of_one_reply() -> None:
    """GitHub Copilot answers for a Claude model with its text in one choice and its tool
    calls in the next, neither naming an ``index``: one reply of both, as numbered choices
    (alternatives) are not."""
    call = {"id": "tooluse_4", "type": "function"}
    call["function"] = {"name": "tides", "arguments": '{"port": "Hull"}'}
    pieces = [
        {"finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Checking."}},
        {"finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [call]}},
    ]
    done = parse({"id": "r-2", "model": "m", "choices": pieces})
    text, used = done.final_content
    assert text == TextBlock(text="Checking.") and isinstance(used, ToolUseBlock)
    assert (used.id, used.name, used.input) == ("tooluse_4", "tides", {"port": "Hull"})
    assert done.stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="tool_calls")


@pytest.mark.parametrize("finish", ["", None, "absent"])
@pytest.mark.parametrize("with_call", [False, True])
def test_a_whole_reply_naming_no_finish_reason_ends_the_turn_or_calls(
    with_call: bool, finish: str | None
) -> None:
    """Snowflake Cortex answers with ``finish_reason: ""``, OpenRouter relaying some providers
    with no ``finish_reason`` at all: a whole reply all the same, ended by its calls or as a
    turn's end."""
    message: dict[str, Any] = {"role": "assistant", "content": "Checking the forecast."}
    if with_call:
        call = {"name": "forecast", "arguments": '{"town": "Oslo"}'}
        message["tool_calls"] = [{"id": "tc_9", "type": "function", "function": call}]
    body = {
        "id": "r-1",
        "model": "some-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17},
    }
    if finish == "absent":
        del body["choices"][0]["finish_reason"]
    done = parse(body)
    kind = StopKind.TOOL_USE if with_call else StopKind.END_TURN
    assert done.stop_reason == StopReason(kind=kind, raw="" if finish == "" else None)
    assert [type(b) for b in done.final_content] == [TextBlock] + [ToolUseBlock] * with_call
