"""tool_shim: tool calling for text-only endpoints, and the TGI stack that uses it.

The request side is checked on the rewritten canonical request (and on the body the TGI stack
sends); the reply side directly on event sequences (every split point of the text, several
calls, malformed tags, cut-off replies), over the openai_chat codec through a FakePeer that
streams plain text in awkward chunks, and in a conversation that swaps between TGI (emulated
tools) and the Anthropic and OpenAI stacks (native tools).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.core.ids import derive_provider_tool_id
from metis.errors import AdapterError, InvalidRequestError
from metis.model import (
    AdapterCapabilities,
    Base64ImageSource,
    CanonicalRequest,
    ImageBlock,
    Message,
    MessageComplete,
    MessageStart,
    Role,
    StopKind,
    StopReason,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    TokenUsage,
    ToolChoice,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.pipeline.call import Call
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.stages.policy.tool_shim import (
    NO_TOOLS,
    RESULT,
    ToolCallParser,
    ToolShim,
    parse_call,
    preamble,
    render_call,
)
from metis.testing.emulator import Emulator, Prompt, Script, text, tools
from metis.testing.emulator import Reply as ScriptedReply

from ..fakes import DROP, STALL, FakePeer, Reply
from ..helpers import answer, bound, make_call

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
FAHRENHEIT = ToolDefinition(
    name="to_fahrenheit",
    description="Convert Celsius to Fahrenheit",
    input_schema={
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
    },
)
TOOLS = [WEATHER, FAHRENHEIT]
OFFERED = frozenset(t.name for t in TOOLS)
ID_A = "tu_01J0000000000000000000000A"
ID_B = "tu_01J0000000000000000000000B"


def req(**fields: Any) -> CanonicalRequest:
    fields.setdefault("messages", [Message.user("Weather in Paris?")])
    return CanonicalRequest(model="tgi:tgi", max_output_tokens=256, **fields)


def tgi_call() -> Call:
    return make_call(provider="tgi", model="tgi:tgi")


def shim(options: dict[str, Any] | None = None, **caps: Any) -> ToolShim:
    """The stage as the tgi adapter builds it, for a model declared with ``caps``."""
    declared = {
        "supports_tools": True,
        "tools_emulated": True,
        "supports_parallel_tool_calls": True,
    }
    capabilities = AdapterCapabilities(**{**declared, **caps})
    return bound(ToolShim(**(options or {})), provider="tgi", capabilities=capabilities)


# The request ---------------------------------------------------------------------------------


def test_tools_leave_the_request_and_the_preamble_joins_the_system_prompt() -> None:
    rewritten, offered = shim().rewrite(req(tools=TOOLS, system_prompt="Be brief."), tgi_call())
    assert offered == OFFERED
    assert rewritten.tools == [] and rewritten.tool_choice is None
    assert rewritten.parallel_tool_calls is None
    assert rewritten.system_prompt == "Be brief.\n\n" + preamble(TOOLS, None, parallel=True)
    assert rewritten.stop_sequences == [RESULT]
    prompt = rewritten.system_prompt
    for tool in TOOLS:  # each definition whole: name, description, schema
        line = json.dumps(
            {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
        )
        assert line in prompt
    assert '<tool_call>{"name": "<tool name>", "arguments": {<arguments>}}</tool_call>' in prompt
    assert "one <tool_call> tag per call" in prompt
    assert '<tool_result name="<tool name>" id="<call id>">' in prompt
    assert 'is_error="true"' in prompt
    assert "otherwise answer in plain text" in prompt


@pytest.mark.parametrize(
    ("choice", "says", "not_says"),
    [
        (ToolChoice.auto(), "Call a tool when it helps you answer", "you must call"),
        (ToolChoice.any(), "you must call at least one of the tools", "when it helps"),
        (ToolChoice.tool("to_fahrenheit"), 'you must call the tool "to_fahrenheit"', "when it"),
    ],
    ids=["auto", "any", "tool"],
)
def test_the_preamble_states_what_tool_choice_demands(
    choice: ToolChoice, says: str, not_says: str
) -> None:
    rewritten, offered = shim().rewrite(req(tools=TOOLS, tool_choice=choice), tgi_call())
    assert offered == OFFERED
    assert rewritten.system_prompt is not None
    assert says in rewritten.system_prompt and not_says not in rewritten.system_prompt


def test_tool_choice_none_offers_no_tools_and_leaves_the_reply_unparsed() -> None:
    request = req(tools=TOOLS, tool_choice=ToolChoice.none(), system_prompt="Be brief.")
    rewritten, offered = shim().rewrite(request, tgi_call())
    assert offered is None
    assert rewritten.tools == [] and rewritten.tool_choice is None
    assert rewritten.system_prompt == "Be brief."
    assert rewritten.stop_sequences == []


def test_without_parallel_calls_the_preamble_asks_for_one_call() -> None:
    one = "Make at most one tool call in a reply."
    rewritten, _ = shim().rewrite(req(tools=TOOLS, parallel_tool_calls=False), tgi_call())
    assert rewritten.system_prompt is not None and one in rewritten.system_prompt
    serial = shim(supports_parallel_tool_calls=False)
    rewritten, _ = serial.rewrite(req(tools=TOOLS), tgi_call())
    assert rewritten.system_prompt is not None and one in rewritten.system_prompt
    assert "one <tool_call> tag per call" not in rewritten.system_prompt


def test_a_request_without_tools_passes_as_it_is() -> None:
    request = req(system_prompt="Be brief.")
    rewritten, offered = shim().rewrite(request, tgi_call())
    assert rewritten is request and offered is None


def test_a_tool_choice_naming_an_unknown_tool_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError, match="'nope'") as info:
        shim().rewrite(req(tools=TOOLS, tool_choice=ToolChoice.tool("nope")), tgi_call())
    assert info.value.error_class == "invalid_request"


def test_the_stop_string_is_added_only_where_there_is_room_and_when_asked() -> None:
    full = req(tools=TOOLS, stop_sequences=["a", "b", "c", "d"])
    assert shim().rewrite(full, tgi_call())[0].stop_sequences == ["a", "b", "c", "d"]
    assert shim().rewrite(req(tools=TOOLS, stop_sequences=["x"]), tgi_call())[0].stop_sequences == [
        "x",
        RESULT,
    ]
    off = shim({"stop_at_result": False})
    assert off.rewrite(req(tools=TOOLS), tgi_call())[0].stop_sequences == []


def test_a_model_without_a_system_turn_gets_the_preamble_in_its_first_user_turn() -> None:
    rewritten, _ = shim(supports_system_prompt=False).rewrite(req(tools=TOOLS), tgi_call())
    assert rewritten.system_prompt is None
    first = rewritten.messages[0]
    assert first.role is Role.USER
    assert first.text == preamble(TOOLS, None, parallel=True) + "\n\nWeather in Paris?"


def history() -> list[Message]:
    return [
        Message.user("Weather in Paris and Rome, in Fahrenheit?"),
        Message.assistant(
            "Checking both.",
            ToolUseBlock(id=ID_A, name="get_weather", input={"city": "Paris"}),
            ToolUseBlock(id=ID_B, name="get_weather", input={"city": "Rome"}),
        ),
        Message.tool(
            ToolResultBlock(tool_use_id=ID_A, content="Paris: sunny, 21C"),
            ToolResultBlock(tool_use_id=ID_B, content="Rome is unreachable", is_error=True),
        ),
        Message.user("Just Paris then."),
    ]


def test_history_tool_calls_and_results_become_text_with_their_canonical_ids() -> None:
    rewritten, _ = shim().rewrite(req(messages=history(), tools=TOOLS), tgi_call())
    messages = rewritten.messages
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert messages[1].content == [
        TextBlock(
            text="Checking both.\n"
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'
        )
    ]
    # The results turn and the user turn after it are one user turn: roles alternate.
    assert messages[2].content == [
        TextBlock(
            text=f'<tool_result name="get_weather" id="{ID_A}">Paris: sunny, 21C</tool_result>\n'
            f'<tool_result name="get_weather" id="{ID_B}" is_error="true">Rome is unreachable'
            "</tool_result>\n\nJust Paris then."
        )
    ]
    assert not any(
        isinstance(b, ToolUseBlock | ToolResultBlock) for m in messages for b in m.content
    )


def test_history_is_converted_even_when_no_tools_are_offered_now() -> None:
    request = req(messages=history(), tools=TOOLS, tool_choice=ToolChoice.none())
    rewritten, offered = shim().rewrite(request, tgi_call())
    assert offered is None
    assert "<tool_call>" in rewritten.messages[1].text
    assert rewritten.system_prompt == NO_TOOLS


def test_history_keeps_reasoning_and_images_in_place() -> None:
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
    thought = ThinkingBlock(thinking="Paris first.")
    messages = [
        Message.user("Show me Paris."),
        Message.assistant(thought, ToolUseBlock(id=ID_A, name="get_weather", input={})),
        Message.tool(
            ToolResultBlock(tool_use_id=ID_A, content=[TextBlock(text="A photo:"), image])
        ),
    ]
    rewritten, _ = shim().rewrite(req(messages=messages, tools=TOOLS), tgi_call())
    assistant, results = rewritten.messages[1], rewritten.messages[2]
    assert assistant.content[0] == thought
    assert assistant.content[1] == TextBlock(text=render_call("get_weather", {}))
    assert results.role is Role.USER
    assert results.content == [
        TextBlock(text=f'<tool_result name="get_weather" id="{ID_A}">A photo:'),
        image,
        TextBlock(text="</tool_result>"),
    ]


def test_calls_are_written_back_exactly_as_the_model_wrote_them() -> None:
    written = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    events = parse([written])
    final = events[-1]
    assert isinstance(final, MessageComplete)
    (block,) = final.final_content
    assert isinstance(block, ToolUseBlock)
    assert render_call(block.name, block.input) == written


# The reply, event by event -------------------------------------------------------------------


def parse(
    chunks: Sequence[str],
    stop: StopReason | None = None,
    offered: frozenset[str] = OFFERED,
    warnings: list[str] | None = None,
    before: Sequence[StreamEvent] = (),
) -> list[StreamEvent]:
    """Feed the deltas of one text block (after ``before``) to a parser; check the output
    with the invariants' StreamChecker; return it."""
    stop = stop or StopReason(kind=StopKind.END_TURN, raw="stop")
    text_index = len({getattr(e, "content_block_index", None) for e in before} - {None})
    final_text = "".join(chunks)
    final: list[Any] = [ThinkingBlock(thinking="hmm")] * text_index
    if final_text:
        final.append(TextBlock(text=final_text))
    inner: list[StreamEvent] = [MessageStart("m1", "model"), *before]
    inner += [TextDelta(text_index, chunk) for chunk in chunks]
    inner.append(MessageComplete(final, stop, TokenUsage(input_tokens=3, output_tokens=4)))

    def warn(reason: str, text: str) -> None:
        if warnings is not None:
            warnings.append(reason)

    parser = ToolCallParser(offered, warn)
    checker = StreamChecker()
    out: list[StreamEvent] = []
    for event in inner:
        parser.feed(event)
        for item in parser.out:
            checker.check(item)
        out.extend(parser.out)
        parser.out.clear()
    checker.check_ended()
    return out


def final_of(events: list[StreamEvent]) -> MessageComplete:
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


def shape(events: list[StreamEvent]) -> list[Any]:
    """The final content with tool ids left out: what a reply means, whatever its chunks."""
    out: list[Any] = []
    for block in final_of(events).final_content:
        if isinstance(block, ToolUseBlock):
            out.append(("call", block.name, block.input))
        elif isinstance(block, TextBlock):
            out.append(("text", block.text))
        else:
            out.append(block.type)
    return out


PARIS = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
ROME = '<tool_call>{"name": "get_weather",\n "arguments": {"city": "Rome"}}</tool_call>'
REPLY = f"Let me check <both> < cities.\n{PARIS}\nand then\n{ROME}\nDone <tool"
EXPECTED = [
    ("text", "Let me check <both> < cities.\n"),
    ("call", "get_weather", {"city": "Paris"}),
    ("text", "\nand then\n"),  # whitespace before text is kept with it
    ("call", "get_weather", {"city": "Rome"}),
    ("text", "\nDone <tool"),
]


def test_text_and_calls_become_blocks_in_order() -> None:
    events = parse([REPLY])
    assert shape(events) == EXPECTED
    assert final_of(events).stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="stop")
    kinds = [(type(e).__name__, getattr(e, "content_block_index", None)) for e in events]
    assert kinds == [
        ("MessageStart", None),
        ("TextDelta", 0),
        ("ToolUseStart", 1),
        ("ToolUseInputDelta", 1),
        ("ToolUseEnd", 1),
        ("TextDelta", 2),
        ("ToolUseStart", 3),
        ("ToolUseInputDelta", 3),
        ("ToolUseEnd", 3),
        ("TextDelta", 4),
        ("TextDelta", 4),  # "<tool": held back until the reply ended, then text after all
        ("MessageComplete", None),
    ]


def test_a_split_anywhere_gives_the_same_reply() -> None:
    for split in range(1, len(REPLY)):
        assert shape(parse([REPLY[:split], REPLY[split:]])) == EXPECTED, split


def test_a_reply_one_character_at_a_time_gives_the_same_reply() -> None:
    events = parse(list(REPLY))
    assert shape(events) == EXPECTED
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    assert len(starts) == 2 and len({e.tool_use_id for e in starts}) == 2
    assert all(re.fullmatch(r"tu_[0-9A-Z]{26}", e.tool_use_id) for e in starts)


def test_every_pair_of_split_points_around_the_tags_gives_the_same_reply() -> None:
    reply = f"A{PARIS}B"
    expected = [("text", "A"), ("call", "get_weather", {"city": "Paris"}), ("text", "B")]
    for i in range(1, len(reply)):
        for j in range(i + 1, len(reply)):
            assert shape(parse([reply[:i], reply[i:j], reply[j:]])) == expected, (i, j)


def test_text_is_passed_on_at_once_and_only_a_possible_tag_is_held_back() -> None:
    parser = ToolCallParser(OFFERED, lambda reason, text: None)
    parser.feed(MessageStart("m", "m"))
    parser.feed(TextDelta(0, "It is a < b, <i>so</i> "))
    assert [getattr(e, "text", None) for e in parser.out] == [None, "It is a < b, <i>so</i> "]
    parser.out.clear()
    parser.feed(TextDelta(0, "let me look <tool_c"))
    assert [e.text for e in parser.out if isinstance(e, TextDelta)] == ["let me look "]
    parser.out.clear()
    parser.feed(TextDelta(0, 'all>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool'))
    assert parser.out == []  # inside the tag: nothing until it closes
    parser.feed(TextDelta(0, "_call> after"))
    assert [type(e) for e in parser.out] == [ToolUseStart, ToolUseInputDelta, ToolUseEnd, TextDelta]


def test_the_arguments_json_is_passed_on_as_the_model_wrote_it() -> None:
    call = '<tool_call>{"name": "to_fahrenheit", "arguments": {"celsius": 21.0 }}</tool_call>'
    events = parse([call])
    delta = next(e for e in events if isinstance(e, ToolUseInputDelta))
    end = next(e for e in events if isinstance(e, ToolUseEnd))
    assert delta.partial_json == '{"celsius": 21.0 }'
    assert end.final_input == {"celsius": 21.0}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"name": "get_weather", "parameters": {"city": "Oslo"}}', {"city": "Oslo"}),
        ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}', {"city": "Oslo"}),
        (
            '\n```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```\n',
            {"city": "Oslo"},
        ),
        ('{"name": "get_weather"}', {}),
        ('{"name": "get_weather", "arguments": ""}', {}),
    ],
    ids=["parameters", "arguments-as-string", "code-fence", "no-arguments", "empty-string"],
)
def test_common_variations_of_the_call_syntax_are_read(body: str, expected: Any) -> None:
    parsed = parse_call(body)
    assert not isinstance(parsed, str)
    assert parsed[0] == "get_weather" and parsed[1] == expected


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}',  # cut short
        '{"name": "get_weather", "arguments": {"city": "Paris"}} extra',
        '{"arguments": {"city": "Paris"}}',  # no name
        '{"name": "get_weather", "arguments": ["Paris"]}',
        '{"name": "get_weather", "arguments": "Paris"}',
        '{"name": "get_weather", "arguments": {"x": NaN}}',
        '["get_weather"]',
        "",
    ],
)
def test_malformed_calls_stay_text_with_a_warning(body: str) -> None:
    warnings: list[str] = []
    reply = f"Sure. <tool_call>{body}</tool_call> Done."
    events = parse([reply[:9], reply[9:20], reply[20:]], warnings=warnings)
    assert shape(events) == [("text", reply)]
    assert final_of(events).stop_reason.kind is StopKind.END_TURN
    assert len(warnings) == 1


def test_a_call_to_a_tool_not_offered_stays_text_with_a_warning() -> None:
    warnings: list[str] = []
    reply = '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'
    events = parse([reply], warnings=warnings)
    assert shape(events) == [("text", reply)]
    assert warnings == ["the model called 'rm_rf', a tool the request does not offer"]


def test_a_good_call_after_a_malformed_one_is_still_a_call() -> None:
    reply = f"<tool_call>{{oops}}</tool_call>{PARIS}"
    assert shape(parse([reply])) == [
        ("text", "<tool_call>{oops}</tool_call>"),
        ("call", "get_weather", {"city": "Paris"}),
    ]


@pytest.mark.parametrize(
    ("stop", "warned"),
    [
        (StopReason(kind=StopKind.END_TURN, raw="stop"), True),
        (StopReason(kind=StopKind.MAX_TOKENS, raw="length"), False),
        (StopReason(kind=StopKind.CANCELLED), False),
        (StopReason(kind=StopKind.ERROR, raw="server_error"), False),
    ],
    ids=["end_turn", "max_tokens", "cancelled", "error"],
)
def test_an_unterminated_tag_at_the_end_is_text(stop: StopReason, warned: bool) -> None:
    warnings: list[str] = []
    reply = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"ci'
    events = parse([reply[:15], reply[15:]], stop=stop, warnings=warnings)
    assert shape(events) == [("text", reply)]
    assert final_of(events).stop_reason == stop
    assert bool(warnings) is warned


def test_a_call_then_a_cut_off_call_keeps_the_first_and_the_rest_as_text() -> None:
    cancelled = StopReason(kind=StopKind.CANCELLED)
    events = parse([PARIS, '\n<tool_call>{"name": "get_'], stop=cancelled)
    assert shape(events) == [
        ("call", "get_weather", {"city": "Paris"}),
        ("text", '\n<tool_call>{"name": "get_'),  # not a call after all: all of it is text
    ]
    assert final_of(events).stop_reason == cancelled  # not tool_use: it was cut off


def test_whitespace_around_calls_is_layout_and_opens_no_block() -> None:
    events = parse(["\n  ", PARIS, "\n", " \n", PARIS, "\n\n"])
    assert shape(events) == [("call", "get_weather", {"city": "Paris"})] * 2
    assert [type(e) for e in events].count(TextDelta) == 0


def test_whitespace_before_text_is_kept_with_it() -> None:
    assert shape(parse(["\n", "  Hi"])) == [("text", "\n  Hi")]
    assert shape(parse(["   "])) == [("text", "   ")]  # no call: the reply as it came


def test_results_the_model_writes_after_its_calls_are_dropped() -> None:
    # A server that stopped at the stop string echoes it (TGI does): dropped, no warning.
    warnings: list[str] = []
    tgi_stop = StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw="stop_sequence")
    events = parse([PARIS, "\n<tool_res", "ult"], stop=tgi_stop, warnings=warnings)
    assert shape(events) == [("call", "get_weather", {"city": "Paris"})]
    assert final_of(events).stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="stop_sequence")
    assert warnings == []
    # A server that did not stop: the invented result goes too, with a warning.
    events = parse(
        [PARIS, f'\n{RESULT} id="x">sunny</tool_result> It is sunny.'], warnings=warnings
    )
    assert shape(events) == [("call", "get_weather", {"city": "Paris"})]
    assert len(warnings) == 1 and "results of its own" in warnings[0]


def test_a_result_tag_before_any_call_is_only_text() -> None:
    reply = f"{RESULT}> is how results look"
    assert shape(parse([reply[:5], reply[5:]])) == [("text", reply)]


def test_a_reply_with_no_call_keeps_its_stop_reason_and_text() -> None:
    events = parse(["Paris is sunny", "."], stop=StopReason(kind=StopKind.END_TURN, raw="stop"))
    assert shape(events) == [("text", "Paris is sunny.")]
    assert final_of(events).stop_reason.kind is StopKind.END_TURN


def test_reasoning_before_the_text_keeps_its_place_and_the_indices_follow() -> None:
    before = [ThinkingDelta(0, "hmm")]
    events = parse(["Sure.", PARIS, " Done."], before=before)
    assert shape(events) == [
        "thinking",
        ("text", "Sure."),
        ("call", "get_weather", {"city": "Paris"}),
        ("text", " Done."),
    ]
    indices = [getattr(e, "content_block_index", None) for e in events[1:-1]]
    assert indices == [0, 1, 2, 2, 2, 3]


# The TGI stack, over the openai_chat codec ---------------------------------------------------


def tgi_chunks(content: str, sizes: Sequence[int], finish: str = "stop") -> list[str]:
    """TGI's stream for a reply: one chunk per piece of ``content`` (cut to ``sizes``, in
    turn), the finish reason, the usage chunk, [DONE]; then the bytes cut mid-line."""
    pieces, pos, i = [], 0, 0
    while pos < len(content):
        size = sizes[i % len(sizes)]
        pieces.append(content[pos : pos + size])
        pos, i = pos + size, i + 1
    lines = []
    for piece in pieces:
        delta = {"role": "assistant", "content": piece}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        lines.append(
            {"object": "chat.completion.chunk", "id": "", "model": "tgi", "choices": [choice]}
        )
    end = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": finish}
    lines.append({"object": "chat.completion.chunk", "id": "", "model": "tgi", "choices": [end]})
    usage = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    lines.append(
        {"object": "chat.completion.chunk", "id": "", "model": "tgi", "choices": [], "usage": usage}
    )
    body = "".join(f"data: {json.dumps(obj)}\n\n" for obj in lines) + "data: [DONE]\n\n"
    return [body[k : k + 37] for k in range(0, len(body), 37)]


def tgi_adapter(peer: FakePeer) -> Adapter:
    return peer.adapter("tgi")


@pytest.mark.anyio
@pytest.mark.parametrize("sizes", [[1], [2, 5], [3, 11, 7], [50]], ids=str)
async def test_the_tgi_stack_turns_streamed_text_into_tool_calls(sizes: list[int]) -> None:
    content = f"Let me check.\n{PARIS}\n{ROME}\n{RESULT}"
    peer = FakePeer(Reply(chunks=tgi_chunks(content, sizes, finish="stop_sequence")))
    adapter = tgi_adapter(peer)
    request = req(tools=TOOLS, system_prompt="Be brief.", stream=True)
    events = [event async for event in adapter.stream(request)]  # the invariants stage checks

    final = final_of(events)
    assert shape(events) == [
        ("text", "Let me check.\n"),
        ("call", "get_weather", {"city": "Paris"}),
        ("call", "get_weather", {"city": "Rome"}),
    ]
    assert final.stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="stop_sequence")
    assert final.usage.input_tokens == 40 and final.usage.output_tokens == 12
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "Let me check.\n"

    body = json.loads(peer.requests[0].content)
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith("Be brief.\n\n# Tools")
    assert body["stop"] == [RESULT]
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body
    assert body["stream_options"] == {"include_usage": True}
    assert peer.requests[0].url == "http://localhost:8080/v1/chat/completions"
    assert peer.requests[0].headers["authorization"] == "Bearer sk-test-0123456789abcdef"


@pytest.mark.anyio
async def test_the_tgi_stack_reads_calls_from_a_whole_json_body() -> None:
    content = f"On it.{PARIS}"
    body = {
        "object": "chat.completion",
        "id": "",
        "model": "tgi",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }
    reply = Reply(chunks=[json.dumps(body)], headers={"content-type": "application/json"})
    adapter = tgi_adapter(FakePeer(reply))
    response = await adapter.complete(req(tools=TOOLS))
    assert response.text == "On it."
    (tool_call,) = response.tool_calls
    assert tool_call.name == "get_weather" and tool_call.input == {"city": "Paris"}
    assert tool_call.id.startswith("tu_")
    assert response.stop_reason == StopReason(kind=StopKind.TOOL_USE, raw="stop")


@pytest.mark.anyio
async def test_the_tgi_stack_passes_plain_text_through_when_no_tools_are_offered() -> None:
    content = f"Here is the syntax: {PARIS}"
    peer = FakePeer(Reply(chunks=tgi_chunks(content, [4])))
    events = [event async for event in tgi_adapter(peer).stream(req(stream=True))]
    assert shape(events) == [("text", content)]
    body = json.loads(peer.requests[0].content)
    assert "stop" not in body and body["messages"][0]["role"] == "user"


# A conversation across TGI (emulated tools) and Anthropic and OpenAI (native tools) ----------


class ScriptedTGI:
    """TGI's Messages API answering from a shared script, as text with <tool_call> tags.

    It refuses (422, as TGI's validation does) a request with anything a bare chat template
    cannot render: tools, tool messages, tool_calls, roles that do not alternate."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        problems = tgi_problems(body)
        if problems:
            error = {"error": "; ".join(problems), "error_type": "validation"}
            return httpx.Response(422, json=error)
        reply = self.script(Prompt(model="tgi", turns=[]))
        content = "".join(render_call(call.name, call.args) for call in reply.calls)
        if reply.text:
            content = reply.text + ("\n" if content else "") + content
        if body.get("stream"):
            chunks = tgi_chunks(content, [3, 8, 1, 13])
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content="".join(chunks)
            )
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        usage = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
        return httpx.Response(
            200,
            json={
                "object": "chat.completion",
                "id": "",
                "model": "tgi",
                "choices": [choice],
                "usage": usage,
            },
        )

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))


def tgi_problems(body: dict[str, Any]) -> list[str]:
    problems = [f"unexpected field {k!r}" for k in ("tools", "tool_choice") if k in body]
    roles = []
    for i, message in enumerate(body["messages"]):
        if message["role"] not in ("system", "user", "assistant"):
            problems.append(f"messages[{i}]: role {message['role']!r}")
        if "tool_calls" in message or not isinstance(message.get("content"), str):
            problems.append(f"messages[{i}]: content must be text")
        if message["role"] != "system":
            roles.append(message["role"])
    if any(a == b for a, b in itertools.pairwise(roles)) or roles[:1] != ["user"]:
        problems.append(f"roles must alternate user/assistant: {roles}")
    return problems


def swap_script() -> list[ScriptedReply]:
    return [
        tools(("get_weather", {"city": "Paris"})),  # tgi
        text("Sunny and 21 °C in Paris."),  # anthropic
        tools(
            ("get_weather", {"city": "Berlin"}),
            ("get_weather", {"city": "Rome"}),
            say="Checking both.",
        ),  # openai
        tools(("to_fahrenheit", {"celsius": 21})),  # tgi
        text("21 °C is 69.8 °F; Berlin is cloudy, Rome is hot."),  # anthropic
        tools(("get_weather", {"city": "Oslo"}), say="One more."),  # tgi
        text("Oslo is cold."),  # openai
        text("Paris sunny, Berlin cloudy, Rome hot, Oslo cold."),  # tgi
    ]


USERS = ["What's the weather in Paris?", "And Berlin and Rome?", "And Oslo?", "One line, please."]


def run_tool(call: ToolUseBlock) -> ToolResultBlock:
    if call.name == "get_weather":
        return ToolResultBlock(tool_use_id=call.id, content=f"{call.input['city']}: mild")
    return ToolResultBlock(tool_use_id=call.id, content=str(call.input["celsius"] * 9 / 5 + 32))


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_conversation_swapping_emulated_and_native_tools_is_accepted_every_turn(
    streaming: bool,
) -> None:
    script = Script(swap_script())
    tgi = ScriptedTGI(script)
    emulator = Emulator(model=script, models="any")
    store = InMemoryToolIdStore()

    def adapter(stack: str, client: httpx.AsyncClient) -> Adapter:
        return build_adapter(
            stack, AdapterConfig(api_key="test-key", http_client=client), tool_id_store=store
        )

    adapters = {
        "tgi": adapter("tgi", tgi.client()),
        "anthropic": adapter("anthropic", emulator.client()),
        "openai": adapter("openai", emulator.client()),
    }
    order = ["tgi", "anthropic", "openai", "tgi", "anthropic", "tgi", "openai", "tgi"]
    users = iter(USERS)
    history = [Message.user(next(users))]
    for name in order:
        request = CanonicalRequest(
            model=f"{name}:{'tgi' if name == 'tgi' else 'm'}",
            session_id="swap",
            system_prompt="Be brief.",
            messages=history,
            tools=TOOLS,
            max_output_tokens=512,
        )
        response = await answer(adapters[name], request, streaming)  # a 4xx would raise here
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        if response.tool_calls:
            assert response.stop_reason.kind is StopKind.TOOL_USE
            history.append(Message.tool(*(run_tool(c) for c in response.tool_calls)))
        elif (following := next(users, None)) is not None:
            history.append(Message.user(following))

    assert script.remaining == 0
    anthropic, openai = emulator.bodies("anthropic"), emulator.bodies("openai")
    assert len(tgi.requests) == 4 and len(anthropic) == 2 and len(openai) == 2
    assert history[-1].text == "Paris sunny, Berlin cloudy, Rome hot, Oslo cold."
    calls = [b for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    assert len(calls) == 5 and all(re.fullmatch(r"tu_[0-9A-Z]{26}", c.id) for c in calls)
    assert len({c.id for c in calls}) == 5
    paris, berlin, rome, celsius, oslo = calls

    # TGI made the Paris call: it goes to Anthropic and OpenAI under ids derived from the
    # canonical one, with its result answering it.
    first_anthropic = anthropic[0]["messages"]
    tool_use = next(b for b in first_anthropic[1]["content"] if b["type"] == "tool_use")
    assert tool_use == {
        "type": "tool_use",
        "id": derive_provider_tool_id(paris.id, "toolu_"),
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert first_anthropic[2]["content"][0]["tool_use_id"] == tool_use["id"]
    openai_call = next(m for m in openai[0]["messages"] if m.get("tool_calls"))
    assert openai_call["tool_calls"][0]["id"] == derive_provider_tool_id(paris.id, "call_")

    # OpenAI made the Berlin and Rome calls: TGI sees them as text, with canonical ids on
    # their results, in one user turn with the question that follows.
    last_tgi = tgi.requests[-1]["messages"]
    texts = "\n".join(m["content"] for m in last_tgi)
    for call in (paris, berlin, rome, celsius, oslo):
        assert render_call(call.name, call.input) in texts
        assert f'<tool_result name="{call.name}" id="{call.id}">' in texts
    assert "Checking both.\n" + render_call("get_weather", {"city": "Berlin"}) in texts
    assert all("call_" not in m["content"] and "toolu_" not in m["content"] for m in last_tgi)
    assert last_tgi[0]["content"].startswith("Be brief.\n\n# Tools")


# The stage itself ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_with_no_tools_the_stage_opens_no_watch_and_passes_events_as_they_are() -> None:
    _, watch = await shim().open(req(), tgi_call())
    assert watch is None  # nothing for the engine's loop to call: no per-event cost at all

    async def inner(request: CanonicalRequest, call: Call) -> Any:
        yield MessageStart()

    assert [e async for e in shim()(req(), tgi_call(), inner)] == [MessageStart()]


@pytest.mark.anyio
async def test_the_stage_logs_one_structured_warning_per_call_it_cannot_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply = '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>'
    final = MessageComplete(
        [TextBlock(text=reply)], StopReason(kind=StopKind.END_TURN), TokenUsage()
    )
    events = [MessageStart(), TextDelta(0, reply[:20]), TextDelta(0, reply[20:]), final]
    seen: list[CanonicalRequest] = []

    async def inner(request: CanonicalRequest, call: Call) -> Any:
        seen.append(request)
        for event in events:
            yield event

    caplog.set_level(logging.WARNING, logger="metis")
    out = [e async for e in shim()(req(tools=TOOLS), tgi_call(), inner)]
    assert seen[0].tools == [] and seen[0].system_prompt is not None
    assert shape(out) == [("text", reply)]
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "metis.tool_shim"]
    assert record.levelno == logging.WARNING
    assert record.__dict__["reason"] == "a <tool_call> tag does not hold a JSON object"
    assert record.__dict__["adapter"] == "tgi" and record.__dict__["request_id"] == "req_1"


def test_native_tool_events_from_inside_keep_their_order_under_new_indices() -> None:
    before = [
        ToolUseStart(0, "native_1", "get_weather"),
        ToolUseInputDelta(0, "native_1", "{}"),
        ToolUseEnd(0, "native_1", "get_weather", {}),
    ]
    native = ToolUseBlock(id="native_1", name="get_weather", input={})
    inner: list[StreamEvent] = [MessageStart(), *before]
    inner += [TextDelta(1, "Also:"), TextDelta(1, PARIS)]
    inner.append(
        MessageComplete(
            [native, TextBlock(text="Also:" + PARIS)],
            StopReason(kind=StopKind.END_TURN, raw="stop"),
            TokenUsage(),
        )
    )
    parser = ToolCallParser(OFFERED, lambda reason, text: None)
    checker = StreamChecker()
    out: list[StreamEvent] = []
    for event in inner:
        parser.feed(event)
        out.extend(parser.out)
        parser.out.clear()
    for event in out:
        checker.check(event)
    checker.check_ended()
    content = final_of(out).final_content
    assert content[0] == native
    assert content[1] == TextBlock(text="Also:")
    assert isinstance(content[2], ToolUseBlock) and content[2].input == {"city": "Paris"}
    assert parser.calls == 1


def test_events_from_inside_are_never_changed_only_passed_on_or_replaced() -> None:
    inner: list[StreamEvent] = [
        MessageStart("m1", "model"),
        TextDelta(0, "Let me look." + PARIS),
        TextDelta(0, " Meanwhile"),  # the text after the call: block 2, not 0
        TextDelta(0, " I wait."),
        ThinkingDelta(1, "hmm", signature="sig"),  # block 3, not 1
        MessageComplete(
            [
                TextBlock(text="Let me look." + PARIS + " Meanwhile I wait."),
                ThinkingBlock(thinking="hmm"),
            ],
            StopReason(kind=StopKind.END_TURN, raw="stop"),
            TokenUsage(),
        ),
    ]
    before = [event.to_dict() for event in inner]
    parser = ToolCallParser(OFFERED, lambda reason, text: None)
    out: list[StreamEvent] = []
    for event in inner:
        parser.feed(event)
        out.extend(parser.out)
        parser.out.clear()
    assert [event.to_dict() for event in inner] == before
    indices = [getattr(e, "content_block_index", None) for e in out]
    assert indices == [None, 0, 1, 1, 1, 2, 2, 3, None]
    assert [e.text for e in out if isinstance(e, TextDelta)] == [
        "Let me look.",
        " Meanwhile",
        " I wait.",
    ]
    final = final_of(out)
    assert final.stop_reason.kind is StopKind.TOOL_USE and final.stop_reason.raw == "stop"
    assert [type(b) for b in final.final_content] == [
        TextBlock,
        ToolUseBlock,
        TextBlock,
        ThinkingBlock,
    ]


def test_blocks_the_inner_stream_never_announced_are_kept_at_the_end() -> None:
    silent = ThinkingBlock(thinking="unannounced")
    inner: list[StreamEvent] = [MessageStart(), TextDelta(0, PARIS)]
    inner.append(
        MessageComplete(
            [TextBlock(text=PARIS), silent], StopReason(kind=StopKind.END_TURN), TokenUsage()
        )
    )
    parser = ToolCallParser(OFFERED, lambda reason, text: None)
    for event in inner:
        parser.feed(event)
    assert shape(parser.out) == [("call", "get_weather", {"city": "Paris"}), "thinking"]


def tgi_lines(*pieces: str) -> list[str]:
    """TGI chunks for ``pieces`` of content, whole SSE events, with no end."""
    out = []
    for piece in pieces:
        delta = {"role": "assistant", "content": piece}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        chunk = {"object": "chat.completion.chunk", "id": "", "model": "tgi", "choices": [choice]}
        out.append(f"data: {json.dumps(chunk)}\n\n")
    return out


CUT = ["Sure.", PARIS[:30], PARIS[30:], '\n<tool_call>{"name": "get_weather", "argu']


@pytest.mark.anyio
async def test_a_cancelled_tgi_stream_ends_with_its_calls_and_the_open_tag_as_text() -> None:
    peer = FakePeer(Reply(chunks=[*tgi_lines(*CUT), STALL]))
    adapter = tgi_adapter(peer)
    request = req(tools=TOOLS, stream=True)
    events: list[StreamEvent] = []

    async def consume() -> None:
        async for event in adapter.stream(request):  # the invariants stage checks each event
            events.append(event)

    async def cancel_when_stalled() -> None:
        await peer.stalled.wait()
        assert adapter.cancel(request.request_id) is True

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            tg.start_soon(cancel_when_stalled)
    final = final_of(events)
    assert final.stop_reason.kind is StopKind.CANCELLED
    assert shape(events) == [
        ("text", "Sure."),
        ("call", "get_weather", {"city": "Paris"}),
        ("text", CUT[-1]),
    ]


@pytest.mark.anyio
async def test_a_tgi_stream_that_breaks_mid_tag_ends_consistently_then_raises() -> None:
    peer = FakePeer(Reply(chunks=[*tgi_lines(*CUT), DROP]))
    events: list[StreamEvent] = []
    with pytest.raises(AdapterError) as info:
        async for event in tgi_adapter(peer).stream(req(tools=TOOLS, stream=True)):
            events.append(event)
    assert info.value.error_class == "network"
    final = final_of(events)
    assert final.stop_reason.kind is StopKind.ERROR
    assert shape(events)[-1] == ("text", CUT[-1])
