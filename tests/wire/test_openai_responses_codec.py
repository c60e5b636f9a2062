"""The OpenAI Responses codec: encoding, stream and body parsing, error classification, and
the round trip of real recorded replies into the next request."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from metis.errors import (
    AuthError,
    ContextOverflowError,
    ErrorClass,
    InvalidRequestError,
    OverloadedError,
    ProtocolError,
    RateLimitError,
    ServerError,
    StackError,
)
from metis.model.content import (
    Base64ImageSource,
    ImageBlock,
    Message,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.response import StopKind
from metis.pipeline.call import Call
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.encoded_messages import made_fresh
from metis.wire.framing.sse import SSEDecoder
from metis.wire.openai_responses import OpenAIResponsesCodec
from tests.helpers import make_call as call_for

from ..recordings import ROOT, interactions

RECORDINGS = ROOT / "openai_responses"
PROVIDER, MODEL = "openai_responses", "openai_responses:gpt-5"
codec = OpenAIResponsesCodec()


# Helpers -----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, block_type: str, reason: str, message_id: str | None = None, **kw: Any):  # type: ignore[no-untyped-def]
        self.calls.append((block_type, reason, {"message_id": message_id, **kw}))

    @property
    def types(self) -> list[str]:
        return [c[0] for c in self.calls]


def make_call() -> Call:
    return call_for(PROVIDER, MODEL)


def req(*messages: Message, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODEL,
        messages=list(messages) or [Message.user("hi")],
        max_output_tokens=kw.pop("max_output_tokens", 1024),
        **kw,
    )


class Dropped:
    """What a real call recorded as dropped, shaped like :class:`Recorder`'s calls."""

    def __init__(self, call: Call) -> None:
        self._call = call

    @property
    def calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(w.block_type, w.reason, {"message_id": w.message_id}) for w in self._call.warnings]

    @property
    def types(self) -> list[str]:
        return [w.block_type for w in self._call.warnings]


def encode(*messages: Message, **kw: Any) -> tuple[dict[str, Any], Dropped]:
    call = make_call()
    return codec.encode(req(*messages, **kw), call), Dropped(call)


def mine(**data: Any) -> ProviderRaw:
    return ProviderRaw(provider=PROVIDER, model=MODEL, data=data)


def run_stream(objs: list[dict[str, Any]]) -> tuple[list[StreamEvent], Recorder]:
    """The events feeding ``objs`` and ending the stream returned, checked."""
    warns = Recorder()
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL, warns))
    events = [event for obj in objs for event in parser.feed(obj)]
    events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events, warns


def final(events: Sequence[StreamEvent]) -> MessageComplete:
    event = events[-1]
    assert isinstance(event, MessageComplete)
    return event


def created(resp_id: str = "resp_1") -> dict[str, Any]:
    response = {"id": resp_id, "model": "gpt-5-2025", "status": "in_progress", "output": []}
    return {"type": "response.created", "response": response}


def completed(status: str = "completed", usage: Any = None, **extra: Any) -> dict[str, Any]:
    usage = usage or {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 30},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 5},
    }
    response = {"id": "resp_1", "model": "gpt-5-2025", "status": status, "usage": usage, **extra}
    kind = "response.completed" if status == "completed" else f"response.{status}"
    return {"type": kind, "response": response}


def message_events(index: int, *pieces: str, item_id: str = "msg_1") -> list[dict[str, Any]]:
    item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress"}
    common = {"output_index": index, "item_id": item_id, "content_index": 0}
    done = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": "".join(pieces), "annotations": []}],
    }
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "content": []},
        },
        {
            "type": "response.content_part.added",
            **common,
            "part": {"type": "output_text", "text": ""},
        },
        *({"type": "response.output_text.delta", **common, "delta": p} for p in pieces),
        {"type": "response.output_text.done", **common, "text": "".join(pieces)},
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]


def call_events(index: int, call_id: str, name: str, *fragments: str) -> list[dict[str, Any]]:
    item = {"id": f"fc_{index}", "type": "function_call", "call_id": call_id, "name": name}
    common = {"output_index": index, "item_id": f"fc_{index}"}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "arguments": "", "status": "in_progress"},
        },
        *(
            {"type": "response.function_call_arguments.delta", **common, "delta": f}
            for f in fragments
        ),
        {
            "type": "response.function_call_arguments.done",
            **common,
            "arguments": "".join(fragments),
        },
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "arguments": "".join(fragments), "status": "completed"},
        },
    ]


def reasoning_events(index: int, *parts: list[str], enc: str = "enc_done") -> list[dict[str, Any]]:
    item = {"id": f"rs_{index}", "type": "reasoning"}
    common = {"output_index": index, "item_id": f"rs_{index}"}
    out: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "summary": [], "encrypted_content": "enc_added"},
        }
    ]
    for s, pieces in enumerate(parts):
        part = {"type": "summary_text", "text": ""}
        out.append(
            {
                "type": "response.reasoning_summary_part.added",
                **common,
                "summary_index": s,
                "part": part,
            }
        )
        for piece in pieces:
            out.append(
                {
                    "type": "response.reasoning_summary_text.delta",
                    **common,
                    "summary_index": s,
                    "delta": piece,
                }
            )
        out.append({"type": "response.reasoning_summary_part.done", **common, "summary_index": s})
    summary = [{"type": "summary_text", "text": "".join(p)} for p in parts]
    done = {**item, "summary": summary, "encrypted_content": enc}
    out.append({"type": "response.output_item.done", "output_index": index, "item": done})
    return out


def other_item_events(index: int, kind: str) -> list[dict[str, Any]]:
    item = {"id": f"x_{index}", "type": kind, "status": "in_progress"}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": f"response.{kind}.in_progress", "output_index": index, "item_id": item["id"]},
        {"type": f"response.{kind}.completed", "output_index": index, "item_id": item["id"]},
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "status": "completed"},
        },
    ]


# Encoding ----------------------------------------------------------------------------------


def test_minimal_body() -> None:
    body, warns = encode(Message.user("Hello"))
    assert body == {
        "model": "gpt-5",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello"}],
            }
        ],
        "max_output_tokens": 1024,
        "store": True,
        "stream": False,
    }
    assert warns.calls == []


def test_encrypted_reasoning_is_asked_for_with_reasoning_unless_set_otherwise() -> None:
    thinking = ThinkingConfig(budget_tokens=1024)
    wanted = ["reasoning.encrypted_content"]
    assert encode(thinking=thinking)[0]["include"] == wanted
    for mode, plain, reasoning in [("always", wanted, wanted), ("never", None, None)]:
        built = get_codec("openai_responses", {"include_encrypted_reasoning": mode})
        assert built.encode(req(), make_call()).get("include") == plain
        assert built.encode(req(thinking=thinking), make_call()).get("include") == reasoning


def test_codec_is_registered_and_takes_settings() -> None:
    assert isinstance(get_codec("openai_responses"), OpenAIResponsesCodec)
    built = get_codec("openai_responses", {"store": False})
    assert built.encode(req(), make_call())["store"] is False
    with pytest.raises(StackError, match="unknown setting 'stor'"):
        get_codec("openai_responses", {"stor": False})
    with pytest.raises(StackError, match="store is one of true, false"):
        get_codec("openai_responses", {"store": "no"})
    with pytest.raises(StackError, match="auto, always, never"):
        get_codec("openai_responses", {"include_encrypted_reasoning": True})


def test_system_prompt_is_instructions() -> None:
    body, _ = encode(Message.user("x"), system_prompt="Be brief.")
    assert body["instructions"] == "Be brief."
    body, _ = encode(Message.user("x"), system_prompt="")
    assert "instructions" not in body


def test_a_system_message_left_in_place_stays_a_system_item() -> None:
    body, _ = encode(Message.system("rules"), Message.user("x"))
    assert body["input"][0] == {
        "type": "message",
        "role": "system",
        "content": [{"type": "input_text", "text": "rules"}],
    }


def test_user_text_and_images() -> None:
    message = Message.user(
        "Look:",
        ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBO")),
        ImageBlock(source=URLImageSource(url="https://x/cat.jpg")),
    )
    body, warns = encode(message)
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look:"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBO",
                    "detail": "auto",
                },
                {"type": "input_image", "image_url": "https://x/cat.jpg", "detail": "auto"},
            ],
        }
    ]
    assert warns.calls == []


def test_assistant_history_from_elsewhere_has_no_item_ids() -> None:
    assistant = Message.assistant(
        "Let me check.", ToolUseBlock(id="call_1", name="f", input={"a": 1})
    )
    answer = Message.tool(ToolResultBlock(tool_use_id="call_1", content="42"))
    body, warns = encode(Message.user("q"), assistant, answer)
    assert body["input"][1:] == [
        # an input message: an output message would need the id and status OpenAI gave it
        {"type": "message", "role": "assistant", "content": "Let me check."},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "42"},
    ]
    assert warns.calls == []


def test_blocks_from_this_provider_go_back_as_the_items_they_came_from() -> None:
    assistant = Message.assistant(
        ThinkingBlock(
            thinking="Plan.",
            signature="enc_1",
            provider_raw=mine(id="rs_1", summary=[{"type": "summary_text", "text": "Plan."}]),
        ),
        TextBlock(text="Checking.", provider_raw=mine(id="msg_1", phase="commentary")),
        ToolUseBlock(
            id="call_1", name="f", input={}, provider_raw=mine(id="fc_1", call_id="call_1")
        ),
    )
    body, warns = encode(
        Message.user("q"), assistant, Message.tool(ToolResultBlock(tool_use_id="call_1"))
    )
    assert body["input"][1:4] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan."}],
            "encrypted_content": "enc_1",
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "phase": "commentary",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": "{}",
        },
    ]
    assert warns.calls == []


def test_a_call_whose_id_was_rewritten_loses_its_item_id() -> None:
    block = ToolUseBlock(
        id="call_derived", name="f", provider_raw=mine(id="fc_1", call_id="call_1")
    )
    body, _ = encode(
        Message.user("q"),
        Message.assistant(block),
        Message.tool(ToolResultBlock(tool_use_id="call_derived")),
    )
    assert "id" not in body["input"][1]


def test_unparsed_arguments_from_this_provider_go_back_raw() -> None:
    block = ToolUseBlock(
        id="call_1", name="f", input={"a": 1}, provider_raw=mine(arguments='{"a": 1,')
    )
    body, _ = encode(
        Message.user("q"),
        Message.assistant(block),
        Message.tool(ToolResultBlock(tool_use_id="call_1")),
    )
    assert body["input"][1]["arguments"] == '{"a": 1,'


def test_reasoning_without_id_or_signature_or_from_elsewhere_is_dropped_with_one_warning() -> None:
    foreign = ThinkingBlock(
        thinking="hmm", signature="sig", provider_raw=ProviderRaw(provider="anthropic")
    )
    unsigned = ThinkingBlock(thinking="hmm", provider_raw=mine(id="rs_1"))
    assistant = Message(
        role=Role.ASSISTANT, content=[foreign, unsigned, TextBlock(text="ok")], id="m1"
    )
    body, warns = encode(Message.user("q"), assistant)
    assert [i["type"] for i in body["input"]] == ["message", "message"]
    assert warns.types == ["thinking", "thinking"]
    assert all(c[2]["message_id"] == "m1" for c in warns.calls)


def test_reasoning_not_followed_by_its_output_is_dropped() -> None:
    unpaired = ThinkingBlock(
        thinking="", signature="e1", provider_raw=mine(id="rs_1", unpaired=True)
    )
    trailing = ThinkingBlock(thinking="", signature="e2", provider_raw=mine(id="rs_2"))
    body, warns = encode(
        Message.user("q"), Message.assistant(unpaired, TextBlock(text="a"), trailing)
    )
    assert [i["type"] for i in body["input"][1:]] == ["message"]
    assert warns.types == ["thinking", "thinking"]


def test_redacted_thinking_and_misplaced_blocks_are_dropped_with_warnings() -> None:
    assistant = Message.assistant(
        RedactedThinkingBlock(data="x"), ImageBlock(source=URLImageSource(url="https://x/i.png"))
    )
    user = Message.user(ThinkingBlock(thinking="t"), "hi")
    body, warns = encode(user, assistant)
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    assert warns.types == ["thinking", "redacted_thinking", "image"]


def test_tool_results() -> None:
    results = Message.tool(
        ToolResultBlock(tool_use_id="c1", content="plain"),
        ToolResultBlock(tool_use_id="c2", content="boom", is_error=True),
        ToolResultBlock(tool_use_id="c3", content=[TextBlock(text="a"), TextBlock(text="b")]),
        ToolResultBlock(tool_use_id="c4", content=""),
    )
    body, warns = encode(Message.user("q"), results)
    outputs = [(i["call_id"], i["output"]) for i in body["input"][1:]]
    assert outputs == [("c1", "plain"), ("c2", "Error: boom"), ("c3", "a\nb"), ("c4", "")]
    assert warns.calls == []


def test_a_tool_result_with_an_image_is_a_list_of_parts() -> None:
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data="AAA"))
    results = Message.tool(
        ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="chart:"), image]),
        ToolResultBlock(tool_use_id="c2", content=[image], is_error=True),
    )
    body, warns = encode(Message.user("q"), results)
    png = {"type": "input_image", "image_url": "data:image/png;base64,AAA", "detail": "auto"}
    assert body["input"][1]["output"] == [{"type": "input_text", "text": "chart:"}, png]
    assert body["input"][2]["output"] == [{"type": "input_text", "text": "Error:"}, png]
    assert warns.calls == []


def test_tool_results_come_before_the_users_other_content() -> None:
    message = Message(
        role=Role.USER,
        content=[TextBlock(text="and also"), ToolResultBlock(tool_use_id="c1", content="r")],
    )
    body, _ = encode(Message.user("q"), message)
    assert [i["type"] for i in body["input"][1:]] == [
        "function_call_output",
        "message",
    ]


def test_tools_are_flat_and_not_strict() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tools = [
        ToolDefinition(name="w", description="Weather", input_schema=schema),
        ToolDefinition(name="n"),
    ]
    body, _ = encode(tools=tools)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "w",
            "description": "Weather",
            "parameters": schema,
            "strict": False,
        },
        {
            "type": "function",
            "name": "n",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
    ]
    assert body["tools"][0]["parameters"] is not schema
    assert "tool_choice" not in body and "parallel_tool_calls" not in body


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.auto(), "auto"),
        (ToolChoice.any(), "required"),
        (ToolChoice.none(), "none"),
        (ToolChoice.tool("w"), {"type": "function", "name": "w"}),
    ],
)
def test_tool_choice(choice: ToolChoice, wire: Any) -> None:
    body, _ = encode(
        tools=[ToolDefinition(name="w")], tool_choice=choice, parallel_tool_calls=False
    )
    assert body["tool_choice"] == wire
    assert body["parallel_tool_calls"] is False


def test_no_tools_means_no_tool_fields() -> None:
    body, _ = encode(tool_choice=ToolChoice.auto(), parallel_tool_calls=True)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)


def test_temperature_and_stop_sequences() -> None:
    body, _ = encode(temperature=0.3)
    assert body["temperature"] == 0.3
    # left out with a warning, as every setting the provider would refuse (docs/contract.md §13),
    # so one request can serve a route of several providers
    body, dropped = encode(stop_sequences=["END"])
    assert "stop" not in body and "stop_sequences" not in body
    assert dropped.types == ["stop_sequences"]


def test_output_schema_is_strict_where_it_can_be() -> None:
    schema = {"title": "Answer v1", "type": "object", "properties": {"a": {"type": "string"}}}
    body, _ = encode(output_schema=schema)
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "Answer_v1" and fmt["strict"] is True
    assert fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["properties"]["a"] == {"type": ["string", "null"]}
    free = {"type": "object", "additionalProperties": True}
    fmt = encode(output_schema=free)[0]["text"]["format"]
    assert fmt == {"type": "json_schema", "name": "output", "schema": free, "strict": False}


@pytest.mark.parametrize(("budget", "effort"), [(1024, "low"), (4096, "medium"), (20000, "high")])
def test_thinking_budget_becomes_reasoning_effort_with_summaries(budget: int, effort: str) -> None:
    body, _ = encode(thinking=ThinkingConfig(budget_tokens=budget))
    assert body["reasoning"] == {"effort": effort, "summary": "auto"}


def test_encode_does_not_mutate_the_request() -> None:
    request = req(
        Message.user("q"),
        Message.assistant(TextBlock(text="a", provider_raw=mine(id="msg_1"))),
        tools=[ToolDefinition(name="w", input_schema={"type": "object", "properties": {}})],
    )
    before = request.model_dump()
    body = codec.encode(request, make_call())
    assert body["tools"][0]["parameters"] is request.tools[0].input_schema  # shared, never edited
    with made_fresh():  # an application's own stage follows encode: a body of its own
        body = codec.encode(request, make_call())
    body["tools"][0]["parameters"]["x"] = 1
    assert request.model_dump() == before


def test_output_items_are_what_a_reply_becomes_when_sent_back() -> None:
    content = [
        TextBlock(text="hi", provider_raw=mine(id="msg_1")),
        ThinkingBlock(thinking="", signature="e", provider_raw=mine(id="rs_1", summary=[])),
    ]
    call = make_call()
    items = codec.output_items(content, call)
    assert [i["type"] for i in items] == ["message"]  # the trailing reasoning cannot go back
    assert call.warnings == []  # and re-encoding says nothing


# Stream parsing ----------------------------------------------------------------------------


def test_stream_text() -> None:
    events, warns = run_stream(
        [
            created(),
            {"type": "response.in_progress", "response": {"id": "resp_1"}},
            *message_events(0, "Hel", "lo"),
            completed(),
        ]
    )
    out = events
    assert out[0] == MessageStart("resp_1", "gpt-5-2025")
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["Hel", "lo"]
    done = final(events)
    assert done.final_content == [TextBlock(text="Hello", provider_raw=mine(id="msg_1"))]
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.END_TURN, "completed")
    assert done.usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 70,
        "output_tokens": 20,
        "cached_input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 5,
    }
    assert done.message_id == "resp_1" and warns.calls == []


def test_stream_function_calls_keep_raw_fragments() -> None:
    events, _ = run_stream(
        [
            created(),
            *message_events(0, "Let me look."),
            *call_events(1, "call_A", "get_weather", '{"ci', 'ty":"Paris"}'),
            *call_events(2, "call_B", "get_time", "{}"),
            completed(),
        ]
    )
    out = events
    assert [(e.tool_use_id, e.tool_name) for e in out if isinstance(e, ToolUseStart)] == [
        ("call_A", "get_weather"),
        ("call_B", "get_time"),
    ]
    assert [e.partial_json for e in out if isinstance(e, ToolUseInputDelta)] == [
        '{"ci',
        'ty":"Paris"}',
        "{}",
    ]
    assert [e.final_input for e in out if isinstance(e, ToolUseEnd)] == [{"city": "Paris"}, {}]
    done = final(events)
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.TOOL_USE, "completed")
    call = done.final_content[1]
    assert isinstance(call, ToolUseBlock) and call.provider_raw == mine(id="fc_1", call_id="call_A")


def test_stream_reasoning_summary_parts_and_the_encrypted_content_of_done() -> None:
    events, _ = run_stream(
        [
            created(),
            *reasoning_events(0, ["**Plan**", "\n\nStep"], ["**Check**"]),
            *message_events(1, "Done."),
            completed(),
        ]
    )
    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(e.thinking for e in thinking) == "**Plan**\n\nStep\n\n**Check**"
    assert [e.signature for e in thinking if e.signature] == ["enc_done"]
    block = final(events).final_content[0]
    assert isinstance(block, ThinkingBlock)
    assert (block.thinking, block.signature) == ("**Plan**\n\nStep\n\n**Check**", "enc_done")
    assert block.provider_raw == mine(
        id="rs_0",
        summary=[
            {"type": "summary_text", "text": "**Plan**\n\nStep"},
            {"type": "summary_text", "text": "**Check**"},
        ],
    )


def test_stream_reasoning_with_only_encrypted_content() -> None:
    events, _ = run_stream(
        [created(), *reasoning_events(0), *call_events(1, "c", "f", "{}"), completed()]
    )
    block = final(events).final_content[0]
    assert isinstance(block, ThinkingBlock) and (block.thinking, block.signature) == (
        "",
        "enc_done",
    )


def test_stream_refusal() -> None:
    common = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
    item = {"id": "msg_1", "type": "message", "role": "assistant"}
    events, _ = run_stream(
        [
            created(),
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.refusal.delta", **common, "delta": "I can't "},
            {"type": "response.refusal.delta", **common, "delta": "help."},
            {"type": "response.refusal.done", **common, "refusal": "I can't help."},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            completed(),
        ]
    )
    done = final(events)
    assert [b for b in done.final_content if isinstance(b, TextBlock)] == []  # not its text
    assert (done.stop_reason.kind, done.stop_reason.raw) == (StopKind.REFUSAL, "completed")
    assert done.stop_reason.explanation == "I can't help."


@pytest.mark.parametrize(
    ("reason", "kind", "raw"),
    [
        ("max_output_tokens", StopKind.MAX_TOKENS, "max_output_tokens"),
        ("content_filter", StopKind.CONTENT_FILTER, "content_filter"),
        ("something_new", StopKind.PROVIDER_SPECIFIC, "something_new"),
        (None, StopKind.PROVIDER_SPECIFIC, "incomplete"),
    ],
)
def test_incomplete_replies(reason: str | None, kind: StopKind, raw: str) -> None:
    end = completed("incomplete", incomplete_details={"reason": reason} if reason else None)
    events, _ = run_stream([created(), *message_events(0, "Once upon"), end])
    assert (final(events).stop_reason.kind, final(events).stop_reason.raw) == (kind, raw)


def test_a_cut_off_tool_call_ends_with_max_tokens() -> None:
    events = call_events(0, "c", "f", '{"a":')[:-2]  # no .done events
    events, warns = run_stream(
        [
            created(),
            *events,
            completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
        ]
    )
    done = final(events)
    assert done.stop_reason.kind is StopKind.MAX_TOKENS
    block = done.final_content[0]
    assert isinstance(block, ToolUseBlock) and block.input == {}
    assert block.provider_raw is not None and block.provider_raw.data["arguments"] == '{"a":'
    assert block.input_error is not None and "output limit" in block.input_error
    assert warns.types == []  # a cut-off call is expected: the stop reason says why


def test_items_outside_the_canonical_model_are_kept_whole_as_opaque_blocks() -> None:
    events, warns = run_stream(
        [
            created(),
            *other_item_events(0, "mcp_list_tools"),
            *reasoning_events(1),
            *other_item_events(2, "file_search_call"),
            {
                "type": "response.output_text.delta",
                "output_index": 2,
                "item_id": "x_2",
                "delta": "no",
            },
            *reasoning_events(3, ["ok"]),
            *message_events(4, "Answer."),
            completed(),
        ]
    )
    assert warns.types == []  # nothing dropped (docs/contract.md §8)
    content = final(events).final_content
    assert [b.type for b in content] == ["opaque", "thinking", "opaque", "thinking", "text"]
    listing, search = content[0], content[2]
    assert isinstance(listing, OpaqueBlock) and listing.kind == "mcp_list_tools"
    assert isinstance(search, OpaqueBlock) and search.kind == "file_search_call"
    assert search.provider_raw.data["item"]["status"] == "completed"  # its .done form
    for thinking in (content[1], content[3]):  # each followed by what goes back with it
        assert thinking.provider_raw is not None and "unpaired" not in thinking.provider_raw.data
    assert final(events).stop_reason.kind is StopKind.END_TURN


@pytest.mark.parametrize(
    "kind",
    [
        "tool_search_call",
        "mcp_approval_request",
        "compaction",
        "apply_patch_call",
        "shell_call",
        "local_shell_call",
    ],
)
def test_a_dropped_item_never_becomes_the_stop_reason(kind: str) -> None:
    events, warns = run_stream(
        [created(), *message_events(0, "Done."), *other_item_events(1, kind), completed()]
    )
    stop = final(events).stop_reason
    assert (stop.kind, stop.raw) == (StopKind.END_TURN, "completed")
    content = final(events).final_content
    assert [b.type for b in content] == ["text", "opaque"] and warns.types == []


def test_a_dropped_item_alongside_a_call_or_in_an_incomplete_reply_keeps_the_status() -> None:
    events, _ = run_stream(
        [
            created(),
            *call_events(0, "c1", "f", "{}"),
            *other_item_events(1, "compaction"),
            completed(),
        ]
    )
    assert final(events).stop_reason.kind is StopKind.TOOL_USE
    events, _ = run_stream(
        [
            created(),
            *other_item_events(0, "shell_call"),
            completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
        ]
    )
    stop = final(events).stop_reason
    assert (stop.kind, stop.raw) == (StopKind.MAX_TOKENS, "max_output_tokens")


def test_a_body_ending_on_a_compaction_item_is_end_turn() -> None:
    body = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "completed",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi"}],
            },
            {"id": "cmp_1", "type": "compaction", "encrypted_content": "gAAA"},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    stop = final(codec.parse_body(body, MessageBuilder(PROVIDER, MODEL, Recorder()))).stop_reason
    assert (stop.kind, stop.raw) == (StopKind.END_TURN, "completed")


def final_message(item_id: str, text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"id": item_id, "type": "message", "role": "assistant", "content": content}


def test_final_output_is_matched_by_index_then_id_never_position() -> None:
    # The stream numbered its items 0 and 2 (a gap); the final output lists them at 0 and 1.
    output = [final_message("msg_a", "First."), final_message("msg_b", "Second.")]
    events, _ = run_stream(
        [
            created(),
            *message_events(0, "First.", item_id="msg_a"),
            *message_events(2, "Second.", item_id="msg_b"),
            completed(output=output),
        ]
    )
    content = final(events).final_content
    assert [b.text for b in content] == ["First.", "Second."]  # type: ignore[union-attr]
    assert [b.provider_raw.data["id"] for b in content] == ["msg_a", "msg_b"]  # type: ignore[union-attr]


def test_a_final_output_item_without_an_id_is_matched_by_its_index() -> None:
    bare = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi."}],
    }
    events, _ = run_stream(
        [created(), *message_events(0, "Hi.", item_id="msg_a"), completed(output=[bare])]
    )
    assert [b.text for b in final(events).final_content] == ["Hi."]  # type: ignore[union-attr]


def test_final_output_items_the_stream_never_announced_are_added_once() -> None:
    # Streamed at index 1 only; the final response also holds msg_a (unstreamed) at 0, and
    # msg_c at 1's position, which the stream gave another item: both are new.
    output = [
        final_message("msg_a", "Unstreamed."),
        final_message("msg_c", "Also new."),
        final_message("msg_b", "Streamed."),
    ]
    events, _ = run_stream(
        [
            created(),
            *message_events(1, "Streamed.", item_id="msg_b"),
            completed(output=output),
        ]
    )
    texts = [b.text for b in final(events).final_content]  # type: ignore[union-attr]
    assert sorted(texts) == ["Also new.", "Streamed.", "Unstreamed."]
    assert texts.count("Streamed.") == 1


def test_items_given_only_whole_are_read_from_done_or_the_final_response() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "From done."}],
    }
    call = {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "c2",
        "name": "f",
        "arguments": '{"x":1}',
    }
    reasoning = {
        "id": "rs_0",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
        "encrypted_content": "e",
    }
    events, _ = run_stream(
        [
            created(),
            {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
            {"type": "response.output_item.done", "output_index": 1, "item": message},
            completed(output=[reasoning, message, call]),
        ]
    )
    content = final(events).final_content
    assert [b.model_dump(exclude={"provider_raw"}) for b in content] == [
        {"type": "thinking", "thinking": "a\n\nb", "signature": "e"},
        {"type": "text", "text": "From done."},
        {"type": "tool_use", "id": "c2", "name": "f", "input": {"x": 1}, "input_error": None},
    ]


def test_cache_write_tokens_are_cache_creation() -> None:
    usage = {
        "input_tokens": 1000,
        "input_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300},
        "output_tokens": 7,
    }
    events, _ = run_stream([created(), *message_events(0, "x"), completed(usage=usage)])
    assert final(events).usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 100,
        "output_tokens": 7,
        "cached_input_tokens": 600,
        "cache_creation_input_tokens": 300,
        "reasoning_tokens": 0,
    }


def test_a_cancelled_response() -> None:
    events = codec.parse_body(body_of(status="cancelled"), MessageBuilder(PROVIDER, MODEL))
    assert final(events).stop_reason.kind is StopKind.CANCELLED


def test_events_after_the_response_completed_are_ignored() -> None:
    late = message_events(1, "late")
    events, _ = run_stream([created(), *message_events(0, "on time"), completed(), *late])
    assert isinstance(events[-1], MessageComplete)
    assert [b.text for b in final(events).final_content if isinstance(b, TextBlock)] == ["on time"]


def test_stream_that_ends_early_is_a_protocol_error() -> None:
    builder = MessageBuilder(PROVIDER, MODEL)
    parser = codec.stream_parser(builder)
    for obj in [created(), *message_events(0, "x")]:
        parser.feed(obj)
    with pytest.raises(ProtocolError, match="ended before"):
        parser.end()


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            {"type": "response.output_text.delta", "delta": "x"},
            "response.output_text.delta.output_index is missing",
        ),
        (
            {"type": "response.output_text.delta", "output_index": 0, "delta": 5},
            "response.output_text.delta.delta: expected a string, got int 5",
        ),
        (
            {"type": "response.function_call_arguments.delta", "output_index": "0", "delta": ""},
            "arguments.delta.output_index: expected a whole number, got string '0'",
        ),
        (
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "function_call", "name": "f"},
            },
            "function_call item.call_id is missing",
        ),
        (
            {"type": "response.output_item.added", "output_index": 0},
            "response.output_item.added.item is missing",
        ),
        (
            {"type": "response.output_item.done", "output_index": [0], "item": {}},
            "response.output_item.done.output_index: expected a whole number, got list",
        ),
        ({"type": "response.created"}, "response.created.response is missing"),
        (
            {
                "type": "response.completed",
                "response": {"status": "completed", "usage": {"input_tokens": "many"}},
            },
            "malformed input_tokens",
        ),
        (
            {"type": "response.completed", "response": {"status": "completed", "usage": [1]}},
            "response.usage: expected an object, got list",
        ),
        (
            {"type": "response.completed", "response": {"output": [{"type": "message"}, 3]}},
            r"response.output\[\]: expected an object, got int 3",
        ),
        (
            {
                "type": "response.completed",
                "response": {"output": [{"type": "reasoning", "summary": [{"text": 1}]}]},
            },
            "reasoning item part.text: expected a string, got int 1",
        ),
        (
            {
                "type": "response.completed",
                "response": {"output": [{"type": "message", "content": [{"text": "x"}]}]},
            },
            r"message item.content\[\].type is missing",
        ),
        ({"no_type": True}, "event.type is missing"),
    ],
)
def test_malformed_events_are_protocol_errors_naming_the_field(
    bad: dict[str, Any], problem: str
) -> None:
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    parser.feed(created())
    with pytest.raises(ProtocolError, match=problem) as caught:
        parser.feed(bad)
    assert type(caught.value) is ProtocolError


@pytest.mark.parametrize(
    ("event", "cls", "retryable"),
    [
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None},
            RateLimitError,
            True,
        ),
        (
            {"type": "error", "error": {"type": "server_error", "message": "oops"}},
            ServerError,
            True,
        ),
        ({"type": "error", "code": "invalid_prompt", "message": "bad"}, InvalidRequestError, False),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "The model failed"},
                },
            },
            ServerError,
            True,
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "rate_limit_exceeded", "message": "limit"},
                },
            },
            RateLimitError,
            True,
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "invalid_image_url", "message": "no"},
                },
            },
            InvalidRequestError,
            False,
        ),
        (
            {"type": "response.failed", "response": {"status": "failed", "error": None}},
            ServerError,
            True,
        ),
    ],
)
def test_errors_in_a_stream_are_classified(
    event: dict[str, Any], cls: type, retryable: bool
) -> None:
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    parser.feed(created())
    with pytest.raises(cls) as caught:
        parser.feed(event)
    assert caught.value.retryable is retryable
    assert caught.value.provider_status is None
    assert caught.value.provider_message


# Whole bodies ------------------------------------------------------------------------------


def body_of(*items: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_9",
        "object": "response",
        "model": "gpt-5-2025",
        "status": status,
        "error": None,
        "output": list(items),
        "usage": {
            "input_tokens": 50,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 9,
        },
    }


@pytest.mark.parametrize(
    ("items", "kind"),
    [
        ([{"type": "message", "id": "m", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "4", "annotations": []}]}],
         StopKind.END_TURN),
        ([{"type": "function_call", "id": "c", "call_id": "c", "name": "add",
           "arguments": '{"a": 1}'}],
         StopKind.TOOL_USE),
    ],
)  # fmt: skip
def test_a_whole_reply_naming_no_status_ended_by_its_calls_or_as_a_turn(
    items: list[dict[str, Any]], kind: StopKind
) -> None:
    """OpenRouter's Responses API answers without a top-level ``status`` (its items have
    theirs): a whole reply all the same."""
    body = body_of(*items)
    del body["status"]
    stop = final(codec.parse_body(body, MessageBuilder(PROVIDER, MODEL))).stop_reason
    assert (stop.kind, stop.raw) == (kind, "")


def test_a_whole_reply_naming_no_status_but_incomplete_details_stops_by_them() -> None:
    body = body_of({"type": "message", "id": "m", "role": "assistant", "content": []})
    del body["status"]
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    stop = final(codec.parse_body(body, MessageBuilder(PROVIDER, MODEL))).stop_reason
    assert (stop.kind, stop.raw) == (StopKind.MAX_TOKENS, "max_output_tokens")


def test_parse_body_gives_the_same_events_as_the_stream() -> None:
    reasoning = {
        "id": "rs_0",
        "type": "reasoning",
        "encrypted_content": "enc_done",
        "summary": [{"type": "summary_text", "text": "Plan"}],
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sure.", "annotations": []}],
    }
    call = {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "call_A",
        "name": "f",
        "arguments": '{"a":1}',
    }
    events = codec.parse_body(body_of(reasoning, message, call), MessageBuilder(PROVIDER, MODEL))
    streamed, _ = run_stream(
        [
            created("resp_9"),
            *reasoning_events(0, ["Plan"]),
            *message_events(1, "Sure."),
            *call_events(2, "call_A", "f", '{"a":1}'),
            completed(),
        ]
    )
    assert final(events).final_content == final(streamed).final_content
    assert final(events).stop_reason == final(streamed).stop_reason
    assert final(events).message_id == "resp_9"
    assert runs(list(events)) == runs(streamed)


def runs(events: list[Any]) -> list[type]:
    """The event types, each run of one type counted once."""
    out: list[type] = []
    for event in events:
        if not out or out[-1] is not type(event):
            out.append(type(event))
    return out


def test_parse_body_errors_and_malformed_bodies() -> None:
    with pytest.raises(ServerError, match="boom"):
        codec.parse_body(
            {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
            MessageBuilder(PROVIDER, MODEL),
        )
    with pytest.raises(RateLimitError):
        codec.parse_body(
            {"error": {"code": "rate_limit_exceeded", "message": "x"}},
            MessageBuilder(PROVIDER, MODEL),
        )
    with pytest.raises(ProtocolError, match=r"response.output: expected a list, got object"):
        codec.parse_body(
            {"id": "r", "status": "completed", "output": {"a": 1}}, MessageBuilder(PROVIDER, MODEL)
        )
    with pytest.raises(ProtocolError, match=r"response.output is missing"):
        codec.parse_body({"id": "r", "status": "completed"}, MessageBuilder(PROVIDER, MODEL))


@pytest.mark.parametrize(
    ("error", "cls", "status"),
    [
        ({"message": "no such model", "code": 400}, InvalidRequestError, 400),
        ({"message": "Rate limited upstream", "code": 429}, RateLimitError, 429),
        (
            {"message": "filtered", "code": "content_filter", "status": 400},
            InvalidRequestError,
            400,
        ),
    ],
)
def test_an_error_object_that_says_its_status_is_classified_by_it(
    error: dict[str, Any], cls: type, status: int
) -> None:
    """As a Chat Completions one is (docs/contract.md section 4): OpenRouter's numeric
    ``code``, Azure's ``status``, in a 200 body, a ``response.failed`` event and an ``error``
    event (they were server errors, retried in vain)."""
    failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
    for event in ({"type": "error", **error}, failed):
        parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
        parser.feed(created())
        with pytest.raises(cls) as caught:
            parser.feed(event)
        assert caught.value.provider_status == status, event
    with pytest.raises(cls) as whole:
        codec.parse_body({"error": error}, MessageBuilder(PROVIDER, MODEL))
    assert whole.value.provider_status == status


# HTTP errors -------------------------------------------------------------------------------


def http(
    status: int, code: str | None, message: str, kind: str = "invalid_request_error", **headers: str
) -> Any:
    body = json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}
    ).encode()
    return codec.error_from_http(status, {"x-request-id": "req_abc", **headers}, body)


@pytest.mark.parametrize(
    ("status", "code", "kind", "message", "cls"),
    [
        (400, "model_not_found", "invalid_request_error", "no such model", InvalidRequestError),
        (400, "context_length_exceeded", "invalid_request_error", "too long", ContextOverflowError),
        (
            400,
            None,
            "invalid_request_error",
            "Input exceeds the context window",
            ContextOverflowError,
        ),
        (401, None, "invalid_request_error", "Incorrect API key provided", AuthError),
        (401, "invalid_api_key", "invalid_request_error", "bad key", AuthError),
        (429, "rate_limit_exceeded", "requests", "slow", RateLimitError),
        (500, None, "server_error", "oops", ServerError),
        (503, None, "server_error", "The engine is currently overloaded", OverloadedError),
        (
            404,
            "previous_response_not_found",
            "invalid_request_error",
            "Previous response not found.",
            InvalidRequestError,
        ),
    ],
)
def test_http_errors_are_classified(
    status: int, code: str | None, kind: str, message: str, cls: type
) -> None:
    error = http(status, code, message, kind)
    assert type(error) is cls
    assert error.provider_status == status and error.request_id == "req_abc"
    assert error.provider_message == message


def test_xais_400_for_a_wrong_key_is_an_auth_error_with_its_code() -> None:
    """xAI answers a wrong key with a 400 whose ``error`` is the message itself and whose
    ``code`` is beside it (crmne/ruby_llm chat_error_handling_with_xai_..._auth_error.yml)."""
    said = "Incorrect API key provided. You can obtain an API key from https://console.x.ai."
    body = json.dumps({"code": "invalid-argument", "error": said}).encode()
    error = codec.error_from_http(400, {}, body)
    assert type(error) is AuthError and error.provider_status == 400
    assert (error.provider_message, error.provider_code) == (said, "invalid-argument")


def test_insufficient_quota_is_rate_limit_but_not_retryable() -> None:
    error = http(429, "insufficient_quota", "You exceeded your current quota")
    assert error.error_class is ErrorClass.RATE_LIMIT and error.retryable is False


def test_retry_after_and_bodies_that_are_not_json() -> None:
    assert http(429, "rate_limit_exceeded", "x", **{"retry-after": "7"}).retry_after_seconds == 7
    html = codec.error_from_http(502, {}, b"<html><title>502 Bad Gateway</title></html>")
    assert isinstance(html, ServerError) and "502 Bad Gateway" in html.provider_message
    empty = codec.error_from_http(500, {}, b"")
    assert isinstance(empty, ServerError) and "empty body" in str(empty)


# Real recordings ---------------------------------------------------------------------------


def recording(name: str) -> list[dict[str, Any]]:
    path = RECORDINGS / name
    if not path.exists():
        pytest.skip(f"no recording {path}")
    return interactions(path)


def parse_recorded(interaction: dict[str, Any]) -> MessageComplete:
    decoder = SSEDecoder()
    text = interaction["response"]["body"]["string"].encode()
    events = decoder.feed(text) + decoder.close()
    events, _ = run_stream([json.loads(e.data) for e in events])
    return final(events)


def test_a_recorded_reply_goes_back_as_the_next_recorded_request_sent_it() -> None:
    """pydantic-ai sent this reply's items back and OpenAI took them: reasoning with the
    encrypted content of output_item.done, the message with its id and phase, the call."""
    first, second = recording(
        "pydantic-ai__test_openai_responses__test_openai_responses_phase_streamed_on_part_start.yaml"
    )
    content = parse_recorded(first).final_content
    sent_back = second["request"]["parsed_body"]["input"]
    assert plain(codec.output_items(content, make_call())) == sent_back[1:4]
    results = Message.tool(
        ToolResultBlock(tool_use_id=sent_back[3]["call_id"], content="Potato City")
    )
    body, warns = encode(
        Message.user(sent_back[0]["content"]), Message.assistant(*content), results
    )
    assert plain(body["input"][1:]) == sent_back[1:]
    assert warns.calls == []


def plain(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recording quirk: the recorded request has the reply's curly quotes made straight."""
    text = json.dumps(items, ensure_ascii=False)
    for curly, straight in (("\u2019", "'"), ("\u201c", '\\"'), ("\u201d", '\\"')):
        text = text.replace(curly, straight)
    return json.loads(text)  # type: ignore[no-any-return]


def test_a_reasoning_item_and_the_web_search_it_led_to_go_back() -> None:
    """Here the first reasoning item led to a web search: it goes back with the search's item,
    whole, then the second reasoning item and the message, as the recorded next request."""
    first, second = recording(
        "pydantic-ai__test_openai_responses__test_openai_responses_model_web_search_tool_stream.yaml"
    )
    content = parse_recorded(first).final_content
    sent_back = second["request"]["parsed_body"]["input"]
    assert [i["type"] for i in sent_back[1:5]] == [
        "reasoning",
        "web_search_call",
        "reasoning",
        "message",
    ]
    call = make_call()
    items = codec.output_items(content, call)
    search = items[1]["action"]
    assert search.pop("sources") == [{"type": "api", "name": "oai-weather"}]  # as it came
    assert items == sent_back[1:5]  # pydantic-ai sent the search back without its sources


def test_an_item_id_with_a_lone_surrogate_reaches_provider_raw_replaced() -> None:
    """The item a block came from goes into its provider_raw: a lone surrogate in it (a
    hostile or corrupted id) is replaced there too, so the reply can be encoded and sent
    back (the continuation stage hashes it as UTF-8)."""
    events, _ = run_stream([created(), *message_events(0, "hi", item_id="msg_\ud800"), completed()])
    (block,) = final(events).final_content
    assert block.provider_raw is not None
    assert block.provider_raw.data["id"] == "msg_\ufffd"
    for item in codec.output_items(final(events).final_content, make_call()):
        json.dumps(item, ensure_ascii=False).encode("utf-8")


def test_a_whole_refusal_s_words_are_its_explanation_unless_it_ended_otherwise() -> None:
    """A refusal part's words are the refusal's explanation (docs/contract.md §3), where the
    gateway writes a refusal back; a reply cut short keeps them as its text."""
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    item = {"type": "message", "id": "m", "role": "assistant", "content": [refusal]}
    done = final(codec.parse_body(body_of(item), MessageBuilder(PROVIDER, MODEL)))
    assert done.stop_reason.kind is StopKind.REFUSAL and done.text == ""
    assert done.stop_reason.explanation == "I can't help with that."
    body = body_of(item, status="incomplete")
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    done = final(codec.parse_body(body, MessageBuilder(PROVIDER, MODEL)))
    assert done.text == "I can't help with that." and done.stop_reason.explanation is None
