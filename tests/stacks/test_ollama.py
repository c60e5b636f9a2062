"""Ollama's native chat API: the codec (no event loop), the stack over cassettes and a scripted
server, a conversation that moves between Anthropic, OpenAI and Ollama, and the lifecycle stage
(server and model checks) over httpx mock transports.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, Registry, build_adapter
from metis.adapter import Adapter
from metis.core.ids import derive_provider_tool_id
from metis.errors import (
    AdapterError,
    AuthError,
    CapabilityError,
    ConfigError,
    ContextOverflowError,
    ErrorClass,
    InvalidRequestError,
    NetworkError,
    OverloadedError,
    ProtocolError,
    RateLimitError,
    ServerError,
)
from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    CanonicalResponse,
    ImageBlock,
    Message,
    MessageComplete,
    MessageStart,
    ProviderRaw,
    RedactedThinkingBlock,
    Role,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingConfig,
    ThinkingDelta,
    ToolChoice,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
    URLImageSource,
)
from metis.model.capabilities import AdapterCapabilities
from metis.model.response import StopKind
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.local.ollama_lifecycle import OllamaLifecycle
from metis.stages.policy.invariants import StreamChecker
from metis.testing.cassette import Cassette, ReplayTransport
from metis.testing.emulator import Emulator, Prompt, Script, text, thinking, tools
from metis.testing.emulator import Reply as ScriptedReply
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.ollama import codec
from metis.wire.ollama.read import stop_reason

from ..fakes import DROP, STALL, FakePeer
from ..fakes import Reply as FakeReply
from ..helpers import RecordingCall, recording_call

CASSETTES = Path(__file__).parents[2] / "cassettes" / "ollama"
MODEL = "ollama:qwen3:8b"
BASE = "http://localhost:11434"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
TOOLS_AND_THINKING = {
    "supports_tools": True,
    "supports_thinking": True,
    "supports_images": True,
    "max_context_tokens": 8192,
}


# Helpers -----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, block_type: str, reason: str, **extra: Any) -> None:
        self.calls.append((block_type, reason, extra))

    @property
    def types(self) -> list[str]:
        return [c[0] for c in self.calls]


def make_call(model: str = MODEL) -> RecordingCall:
    """A real call's identity, keeping what the codec says it dropped."""
    return recording_call("ollama", model)


def codec_for(**options: Any) -> Any:
    """The codec as the encode stage of an adapter with these ``options`` holds it, for a model
    with a 4,096-token context window."""
    window = AdapterCapabilities(max_context_tokens=4096)
    return codec.for_adapter(AdapterConfig(settings=options).settings, lambda _model: window)


ollama = codec_for()
"""The codec of an adapter configured with no options."""


def req(*messages: Message, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=kw.pop("model", MODEL),
        messages=list(messages) or [Message.user("hi")],
        max_output_tokens=kw.pop("max_output_tokens", 256),
        **kw,
    )


def line(message: dict[str, Any] | None = None, done: bool = False, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"model": "qwen3:8b", "created_at": "2025-08-20T13:48:23.241046Z"}
    if message is not None:
        obj["message"] = {"role": "assistant", **message}
    return {**obj, "done": done, **extra}


def tool_call(name: str, arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def done(reason: str | None = "stop", **counts: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {"prompt_eval_count": 12, "eval_count": 5, **counts}
    if reason is not None:
        extra["done_reason"] = reason
    return line({"content": ""}, True, **{k: v for k, v in extra.items() if v is not None})


def run(objs: list[dict[str, Any]]) -> tuple[list[StreamEvent], Recorder]:
    warns = Recorder()
    builder = MessageBuilder("ollama", MODEL, warns)
    parser = codec.stream_parser(builder)
    events = [event for obj in objs for event in parser.feed(obj)]
    events += parser.end()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events, warns


def final(events: list[StreamEvent]) -> MessageComplete:
    assert isinstance(events[-1], MessageComplete)
    return events[-1]


def ollama_adapter(
    handler: Callable[[httpx.Request], httpx.Response] | httpx.AsyncBaseTransport,
    store: InMemoryToolIdStore | None = None,
    **config: Any,
) -> Adapter:
    transport = (
        handler if isinstance(handler, httpx.AsyncBaseTransport) else httpx.MockTransport(handler)
    )
    config.setdefault("capabilities", TOOLS_AND_THINKING)
    return build_adapter(
        "ollama",
        AdapterConfig(http_client=httpx.AsyncClient(transport=transport), **config),
        tool_id_store=store or InMemoryToolIdStore(),
    )


def ndjson(*objs: dict[str, Any]) -> httpx.Response:
    body = "".join(json.dumps(o) + "\n" for o in objs).encode()
    return httpx.Response(200, headers={"content-type": "application/x-ndjson"}, content=body)


def answer(request: httpx.Request, *objs: dict[str, Any]) -> httpx.Response:
    """The lines of a streamed reply, or, when the request did not stream, the one object
    Ollama sends instead: the lines' message fields joined, the done line's fields."""
    if json.loads(request.content).get("stream"):
        return ndjson(*objs)
    merged: dict[str, Any] = {"role": "assistant", "content": ""}
    for obj in objs:
        message = obj.get("message") or {}
        for key in ("content", "thinking"):
            if message.get(key):
                merged[key] = merged.get(key, "") + message[key]
        if message.get("tool_calls"):
            merged["tool_calls"] = [*merged.get("tool_calls", []), *message["tool_calls"]]
    return httpx.Response(200, json={**objs[-1], "message": merged})


# Encoding ----------------------------------------------------------------------------------


def test_codec_is_registered() -> None:
    assert get_codec("ollama") is codec
    assert codec.name == "ollama"


def test_minimal_body() -> None:
    assert ollama.encode(req(Message.user("hello")), make_call()) == {
        "model": "qwen3:8b",
        "messages": [{"role": "user", "content": "hello"}],
        "options": {"num_predict": 256, "num_ctx": 4096},
        "stream": False,
    }


def test_generation_settings_go_under_options_and_the_schema_into_format() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    request = req(
        system_prompt="Be terse.",
        temperature=0.0,
        stop_sequences=["END"],
        output_schema=schema,
        thinking=ThinkingConfig(budget_tokens=1024),
        stream=True,
    )
    body = ollama.encode(request, make_call())
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    assert body["options"] == {
        "num_predict": 256,
        "temperature": 0.0,
        "stop": ["END"],
        "num_ctx": 4096,
    }
    assert body["format"] == schema
    assert body["think"] is True
    assert body["stream"] is True
    assert "keep_alive" not in body


def test_adapter_options_set_context_keep_alive_and_more_model_options() -> None:
    call = make_call()
    encoder = codec_for(num_ctx=None, keep_alive="30m", model_options={"seed": 7, "top_k": 20})
    body = encoder.encode(req(), call)
    assert body["options"] == {"seed": 7, "top_k": 20, "num_predict": 256}
    assert body["keep_alive"] == "30m"
    assert codec_for(num_ctx=32768).encode(req(), make_call())["options"]["num_ctx"] == 32768
    with pytest.raises(ConfigError, match="model_options"):
        codec_for(model_options=["seed"]).encode(req(), make_call())


@pytest.mark.parametrize(
    ("configured", "budget", "sent"),
    [
        (None, 4000, True),
        ("high", 100, "high"),
        ("budget", 1000, "low"),
        ("budget", 4000, "medium"),
        ("budget", 9000, "high"),
        ("nonsense", 4000, True),
    ],
)
def test_think_is_true_or_the_configured_level(configured: Any, budget: int, sent: Any) -> None:
    call = make_call()
    encoder = codec_for(**({"think": configured} if configured else {}))
    body = encoder.encode(req(thinking=ThinkingConfig(budget_tokens=budget)), call)
    assert body["think"] == sent


def test_tools_are_functions_with_their_schema() -> None:
    body = ollama.encode(req(tools=[WEATHER]), make_call())
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER.input_schema,
            },
        }
    ]


def test_tool_choice_none_sends_no_tools_and_forcing_is_said_to_be_unenforced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    other = ToolDefinition(name="other")
    call = make_call()
    assert "tools" not in ollama.encode(req(tools=[WEATHER], tool_choice=ToolChoice.none()), call)
    caplog.set_level(logging.WARNING, logger="metis")
    named = ollama.encode(req(tools=[WEATHER, other], tool_choice=ToolChoice.tool("other")), call)
    assert [t["function"]["name"] for t in named["tools"]] == ["other"]
    forced = ollama.encode(req(tools=[WEATHER, other], tool_choice=ToolChoice.any()), call)
    assert len(forced["tools"]) == 2
    event = "metis.tool_choice_not_enforced"
    assert len([r for r in caplog.records if getattr(r, "event", "") == event]) == 2


def test_a_history_made_elsewhere_becomes_ollama_messages() -> None:
    call_a = ToolUseBlock(id="call_A", name="get_weather", input={"city": "Paris"})
    call_b = ToolUseBlock(id="call_B", name="get_time", input={})
    signed = ThinkingBlock(
        thinking="Paris first.", signature="sig", provider_raw=ProviderRaw(provider="anthropic")
    )
    history = [
        Message.user("Weather and time in Paris?"),
        Message.assistant(signed, "Checking.", call_a, call_b),
        Message(
            role=Role.TOOL,
            content=[
                ToolResultBlock(tool_use_id="call_A", content="21 °C"),
                ToolResultBlock(tool_use_id="call_B", content="clock broke", is_error=True),
            ],
        ),
        Message.user("Thanks"),
    ]
    call = make_call()
    body = ollama.encode(req(*history), call)
    assert body["messages"] == [
        {"role": "user", "content": "Weather and time in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_A", **tool_call("get_weather", {"city": "Paris"})},
                {"id": "call_B", **tool_call("get_time", {})},
            ],
        },
        {"role": "tool", "content": "21 °C", "tool_name": "get_weather", "tool_call_id": "call_A"},
        {
            "role": "tool",
            "content": "Error: clock broke",
            "tool_name": "get_time",
            "tool_call_id": "call_B",
        },
        {"role": "user", "content": "Thanks"},
    ]
    assert call.dropped_types == ["thinking"]
    assert "produced by anthropic" in call.dropped[0][1]


def test_own_reasoning_goes_back_to_the_same_model_and_no_other() -> None:
    origin = ProviderRaw(provider="ollama", model=MODEL)
    mine = ThinkingBlock(thinking="Think.", provider_raw=origin)
    history = [Message.user("q"), Message.assistant(mine, "a"), Message.user("again")]
    same = make_call()
    assert ollama.encode(req(*history), same)["messages"][1] == {
        "role": "assistant",
        "content": "a",
        "thinking": "Think.",
    }
    assert same.dropped == []
    other = make_call(model="ollama:llama3.1:8b")
    assert ollama.encode(req(*history, model="ollama:llama3.1:8b"), other)["messages"][1] == {
        "role": "assistant",
        "content": "a",
    }
    assert other.dropped_types == ["thinking"]
    assert "model ollama:qwen3:8b" in other.dropped[0][1]
    unknown = make_call()
    ollama.encode(req(Message.assistant(ThinkingBlock(thinking="x")), Message.user("u")), unknown)
    assert "unknown" in unknown.dropped[0][1]


def test_redacted_reasoning_and_misplaced_blocks_are_dropped_whole() -> None:
    call = make_call()
    history = [
        Message.user("q", ToolUseBlock(id="x", name="n")),
        Message.assistant(RedactedThinkingBlock(data="opaque"), "a"),
        Message.user("u"),
    ]
    body = ollama.encode(req(*history), call)
    assert body["messages"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "u"},
    ]
    assert call.dropped_types == ["tool_use", "redacted_thinking"]


def test_images_are_bare_base64_url_images_are_dropped_tool_result_images_follow() -> None:
    png = Base64ImageSource(media_type="image/png", data="iVBORw0KGgo=")
    url = URLImageSource(url="https://example.com/cat.png")
    result = ToolResultBlock(
        tool_use_id="c1", content=[TextBlock(text="see"), ImageBlock(source=png)]
    )
    history = [
        Message.user("look", ImageBlock(source=png), ImageBlock(source=url), "closely"),
        Message.assistant(ToolUseBlock(id="c1", name="snap")),
        Message.user(result, "and?"),
    ]
    call = make_call()
    messages = ollama.encode(req(*history), call)["messages"]
    assert messages[0] == {"role": "user", "content": "look\nclosely", "images": ["iVBORw0KGgo="]}
    # a tool message holds text only: the result's image follows in the user message
    note = "see\n[image 1 follows in the next message]"
    assert messages[2:] == [
        {"role": "tool", "content": note, "tool_name": "snap", "tool_call_id": "c1"},
        {"role": "user", "content": "and?", "images": ["iVBORw0KGgo="]},
    ]
    assert call.dropped_types == ["image"]
    assert "URL" in call.dropped[0][1]


def test_a_turn_of_tool_results_only_sends_no_empty_user_message() -> None:
    history = [
        Message.user("go"),
        Message.assistant(ToolUseBlock(id="c1", name="t")),
        Message.tool(ToolResultBlock(tool_use_id="c1", content="ok")),
    ]
    roles = [m["role"] for m in ollama.encode(req(*history), make_call())["messages"]]
    assert roles == ["user", "assistant", "tool"]


# Parsing -----------------------------------------------------------------------------------


def test_a_text_stream_through_the_hot_path() -> None:
    events, _ = run(
        [
            line({"content": "Hello"}),
            line({"content": ""}),
            line({"content": " there"}),
            done("stop", prompt_eval_count=15, eval_count=2),
        ]
    )
    assert events[0] == MessageStart(None, "qwen3:8b")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello", " there"]
    complete = final(events)
    assert complete.final_content == [TextBlock(text="Hello there")]
    assert complete.stop_reason.kind is StopKind.END_TURN and complete.stop_reason.raw == "stop"
    assert complete.usage.model_dump() == {
        "input_tokens": 15,
        "output_tokens": 2,
        "cached_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 0,  # Ollama does not report it
        "estimated": False,
    }


def test_thinking_then_text_then_whole_tool_calls_without_ids() -> None:
    events, warns = run(
        [
            line({"content": "", "thinking": "Two "}),
            line({"content": "", "thinking": "cities."}),
            line({"content": "Checking."}),
            line({"content": "", "tool_calls": [tool_call("w", {"city": "Paris", "n": 1})]}),
            line({"content": "", "tool_calls": [tool_call("w", {"city": "Zürich"})]}),
            done("stop"),
        ]
    )  # fmt: skip
    assert warns.calls == []
    assert [e.thinking for e in events if isinstance(e, ThinkingDelta)] == ["Two ", "cities."]
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    assert [e.tool_name for e in starts] == ["w", "w"]
    ids = [e.tool_use_id for e in starts]
    assert all(i.startswith("call_") and len(i) == 31 for i in ids) and ids[0] != ids[1]
    deltas = [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)]
    assert deltas == ['{"city":"Paris","n":1}', '{"city":"Zürich"}']
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    assert [e.final_input for e in ends] == [{"city": "Paris", "n": 1}, {"city": "Zürich"}]
    complete = final(events)
    assert [type(b).__name__ for b in complete.final_content] == [
        "ThinkingBlock",
        "TextBlock",
        "ToolUseBlock",
        "ToolUseBlock",
    ]
    reasoning = complete.final_content[0]
    assert isinstance(reasoning, ThinkingBlock)
    assert reasoning.thinking == "Two cities." and reasoning.signature is None
    assert reasoning.provider_raw == ProviderRaw(provider="ollama", model=MODEL)
    assert complete.stop_reason.kind is StopKind.TOOL_USE and complete.stop_reason.raw == "stop"


def test_a_tool_call_keeps_the_id_a_newer_server_issues_and_takes_string_arguments() -> None:
    events, _ = run(
        [
            line({"content": "", "tool_calls": [
                {"id": "call_mo1wm122", "function": {"index": 0, "name": "a", "arguments": {}}},
                {"function": {"name": "b", "arguments": '{"x": [1, 2]}'}},
                {"function": {"name": "c"}},
            ]}),
            done("stop"),
        ]
    )  # fmt: skip
    blocks = final(events).final_content
    assert isinstance(blocks[0], ToolUseBlock) and blocks[0].id == "call_mo1wm122"
    assert [(b.name, b.input) for b in blocks if isinstance(b, ToolUseBlock)] == [
        ("a", {}),
        ("b", {"x": [1, 2]}),
        ("c", {}),
    ]
    assert [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)] == [
        "{}",
        '{"x": [1, 2]}',
    ]


@pytest.mark.parametrize(
    ("raw", "called", "kind"),
    [
        ("stop", False, StopKind.END_TURN),
        ("stop", True, StopKind.TOOL_USE),
        ("length", False, StopKind.MAX_TOKENS),
        ("length", True, StopKind.MAX_TOKENS),
        ("load", False, StopKind.PROVIDER_SPECIFIC),
        ("unload", False, StopKind.PROVIDER_SPECIFIC),
        (None, False, StopKind.PROVIDER_SPECIFIC),
        (None, True, StopKind.TOOL_USE),
    ],
)
def test_stop_reasons_are_never_silently_end_turn(
    raw: str | None, called: bool, kind: StopKind
) -> None:
    reason = stop_reason(raw, called)
    assert reason.kind is kind and reason.raw == raw


def test_a_load_answer_has_no_content_and_a_provider_specific_stop() -> None:
    events, _ = run([line({"content": ""}, True, done_reason="load")])
    complete = final(events)
    assert complete.final_content == []
    assert complete.stop_reason.kind is StopKind.PROVIDER_SPECIFIC
    assert complete.stop_reason.raw == "load"


def test_missing_counts_leave_usage_unreported_for_the_estimate() -> None:
    builder = MessageBuilder("ollama", MODEL)
    parser = codec.stream_parser(builder)
    parser.feed(line({"content": "hi"}))
    parser.feed(done("stop", prompt_eval_count=None, eval_count=None))
    assert not builder.usage_reported
    builder = MessageBuilder("ollama", MODEL)
    codec.parse_body(done("stop", prompt_eval_count=None, eval_count=7), builder)
    assert builder.usage_reported and builder.token_usage().output_tokens == 7


def test_an_error_line_inside_the_stream_is_raised_classified() -> None:
    builder = MessageBuilder("ollama", MODEL)
    parser = codec.stream_parser(builder)
    parser.feed(line({"content": "par"}))
    with pytest.raises(ServerError) as caught:
        parser.feed({"error": "an error was encountered while running the model: unexpected EOF"})
    assert caught.value.provider_status is None and caught.value.retryable
    assert "unexpected EOF" in caught.value.provider_message
    with pytest.raises(CapabilityError):
        codec.stream_parser(MessageBuilder("ollama", MODEL)).feed(
            {"error": "registry.ollama.ai/library/gemma3:1b does not support thinking"}
        )


def test_a_stream_cut_short_or_running_past_done_is_a_protocol_error() -> None:
    parser = codec.stream_parser(MessageBuilder("ollama", MODEL))
    parser.feed(line({"content": "par"}))
    with pytest.raises(ProtocolError, match="before its done line"):
        parser.end()
    parser = codec.stream_parser(MessageBuilder("ollama", MODEL))
    parser.feed(done("stop"))
    with pytest.raises(ProtocolError, match="after its done line"):
        parser.feed(line({"content": "late"}))


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        (line({"content": 5}), "message.content: expected a string, got int 5"),
        (line({"content": "", "thinking": ["x"]}), "message.thinking: expected a string"),
        (line({"content": "", "tool_calls": "oops"}), "message.tool_calls: expected a list"),
        (
            line({"content": "", "tool_calls": [{"function": {"arguments": {}}}]}),
            "function.name is missing",
        ),
        (
            line({"content": "", "tool_calls": [{"function": {"name": "a", "arguments": [1]}}]}),
            "function.arguments: expected an object, got list",
        ),
        (
            line({"content": "", "tool_calls": [{"name": "a"}]}),
            "tool_calls\\[\\].function is missing",
        ),
        (done("stop", eval_count="12"), "eval_count: expected a whole number, got string"),
        (done("stop", prompt_eval_count=True), "prompt_eval_count: expected a whole number"),
        (line({"content": ""}, True, done_reason=3), "done_reason: expected a string, got int 3"),
        ({"model": MODEL, "message": ["x"], "done": False}, "line.message: expected an object"),
    ],
    ids=[
        "content-not-text",
        "thinking-not-text",
        "tool-calls-not-a-list",
        "no-function-name",
        "arguments-a-list",
        "no-function",
        "count-a-string",
        "count-a-bool",
        "done-reason-a-number",
        "message-a-list",
    ],
)
def test_malformed_objects_are_protocol_errors_naming_the_field(
    obj: dict[str, Any], problem: str
) -> None:
    parser = codec.stream_parser(MessageBuilder("ollama", MODEL))
    with pytest.raises(ProtocolError, match=problem) as caught:
        parser.feed(obj)
    assert type(caught.value) is ProtocolError


def test_a_whole_body_gives_the_same_events_as_a_stream() -> None:
    # The shape of real-traffic/ollama/...TestCloudToolCall.resp1: thinking, an id, done.
    body = {
        "model": "gpt-oss:120b",
        "created_at": "2026-03-03T23:44:44.118089028Z",
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "Use function getWeather.",
            "tool_calls": [
                {
                    "id": "call_mo1wm122",
                    "function": {"index": 0, "name": "getWeather", "arguments": {"location": "SF"}},
                }
            ],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 145,
        "eval_count": 44,
    }
    complete = final(list(codec.parse_body(body, MessageBuilder("ollama", MODEL))))
    assert [type(b).__name__ for b in complete.final_content] == ["ThinkingBlock", "ToolUseBlock"]
    assert complete.stop_reason.kind is StopKind.TOOL_USE
    assert (complete.usage.input_tokens, complete.usage.output_tokens) == (145, 44)
    assert complete.model == "gpt-oss:120b"


def test_a_body_that_is_an_error_or_not_done_is_raised() -> None:
    with pytest.raises(InvalidRequestError, match="ollama pull llama9"):
        codec.parse_body({"error": "model 'llama9' not found"}, MessageBuilder("ollama", MODEL))
    with pytest.raises(ProtocolError, match="without done"):
        codec.parse_body(line({"content": "half"}), MessageBuilder("ollama", MODEL))


# Errors ------------------------------------------------------------------------------------

GEMMA = "registry.ollama.ai/library/gemma3:1b"
BUSY = "server busy, please try again.  maximum pending requests exceeded"
NO_MEMORY = "model requires more system memory (5.5 GiB) than is available (3.2 GiB)"


@pytest.mark.parametrize(
    ("status", "said", "cls", "retryable"),
    [
        (400, f"{GEMMA} does not support tools", CapabilityError, False),
        (400, f"{GEMMA} does not support thinking", CapabilityError, False),
        (400, "model is missing data required for image input", CapabilityError, False),
        (404, "model 'qwen3:8b' not found", InvalidRequestError, False),
        (404, 'model "llama3" not found, try pulling it first', InvalidRequestError, False),
        (400, "model is required", InvalidRequestError, False),
        (400, "input length exceeds the context length", ContextOverflowError, False),
        (503, BUSY, OverloadedError, True),
        (500, NO_MEMORY, ServerError, False),
        (500, "llama runner process has terminated: exit status 2", ServerError, True),
        (401, "unauthorized", AuthError, False),
        (429, "too many requests", RateLimitError, True),
    ],
)
def test_http_errors_are_classified_from_status_and_text(
    status: int, said: str, cls: type[AdapterError], retryable: bool
) -> None:
    error = codec.error_from_http(status, {}, json.dumps({"error": said}).encode())
    assert type(error) is cls
    assert error.provider_status == status
    assert error.retryable is retryable
    assert error.provider_message == said
    assert said in error.message


@pytest.mark.parametrize(
    ("status", "body", "cls", "says"),
    [
        (404, b"404 page not found", InvalidRequestError, "404 page not found"),
        (502, b"<html><title>Bad Gateway</title></html>", ServerError, "Bad Gateway"),
        (500, b"", ServerError, "HTTP 500"),
        (500, b'{"error": {"unexpected": "shape"}}', ServerError, "unexpected"),
    ],
)
def test_bodies_that_are_not_ollama_errors_are_classified_by_status(
    status: int, body: bytes, cls: type[AdapterError], says: str
) -> None:
    error = codec.error_from_http(status, {}, body)
    assert type(error) is cls and says in error.message


def test_the_pull_hint_is_ours_and_the_provider_message_is_theirs() -> None:
    error = codec.error_from_http(404, {}, b'{"error":"model \'qwen3:8b\' not found"}')
    assert error.provider_message == "model 'qwen3:8b' not found"
    assert error.message.endswith("pull it first: `ollama pull qwen3:8b`")


def test_retry_after_is_read_from_the_headers() -> None:
    error = codec.error_from_http(429, {"Retry-After": "7"}, b'{"error":"slow down"}')
    assert error.retry_after_seconds == 7.0


# The stack, over cassettes -----------------------------------------------------------------


def golden_request(stream: bool) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODEL,
        session_id="golden",
        system_prompt="You are a weather assistant.",
        messages=[Message.user("What's the weather in Paris and in Rome, in Celsius?")],
        tools=[WEATHER],
        max_output_tokens=1024,
        temperature=0.2,
        thinking=ThinkingConfig(budget_tokens=2048),
        stream=stream,
    )


def replayed(cassette: str, store: InMemoryToolIdStore | None = None) -> tuple[Adapter, Any]:
    replay = ReplayTransport(CASSETTES / cassette)
    return ollama_adapter(replay, store), replay


async def golden_stream() -> list[StreamEvent]:
    adapter, replay = replayed("tool_call_stream.yaml")
    events = [e async for e in adapter.stream(golden_request(stream=True))]
    assert replay.remaining == 0
    return events


@pytest.mark.anyio
async def test_golden_stream_round_trips_and_keeps_the_invariants() -> None:
    events = await golden_stream()
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    complete = final(events)
    reasoning, sentence, *calls = complete.final_content
    assert isinstance(reasoning, ThinkingBlock)
    assert reasoning.thinking == "The user wants Paris and Rome in Celsius; two calls."
    assert sentence == TextBlock(text="I'll check both cities — Paris and Rome.")
    assert [(c.name, c.input) for c in calls if isinstance(c, ToolUseBlock)] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_weather", {"city": "Rome", "unit": "celsius"}),
    ]
    assert all(c.id.startswith("tu_") for c in calls if isinstance(c, ToolUseBlock))
    assert complete.stop_reason.kind is StopKind.TOOL_USE and complete.stop_reason.raw == "stop"
    assert complete.usage.model_dump(exclude={"estimated"}) == {
        "input_tokens": 412,
        "output_tokens": 87,
        "cached_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "reasoning_tokens": 0,
    }


@pytest.mark.anyio
async def test_golden_partial_json_is_each_call_arguments_as_sent() -> None:
    events = await golden_stream()
    cassette = Cassette.load(CASSETTES / "tool_call_stream.yaml")
    body = b"".join(cassette.interactions[0].response.body_chunks()).decode()
    expected = [
        json.dumps(call["function"]["arguments"], separators=(",", ":"))
        for obj in map(json.loads, body.splitlines())
        for call in obj["message"].get("tool_calls") or []
    ]
    assert [e.partial_json for e in events if isinstance(e, ToolUseInputDelta)] == expected


@pytest.mark.anyio
async def test_golden_streamed_and_complete_calls_agree() -> None:
    complete = final(await golden_stream())
    adapter, replay = replayed("tool_call.yaml")
    response = await adapter.complete(golden_request(stream=False))
    assert replay.remaining == 0
    assert response.usage == complete.usage
    assert response.stop_reason == complete.stop_reason
    strip = [b.model_dump(exclude={"id"}) for b in response.content]
    assert strip == [b.model_dump(exclude={"id"}) for b in complete.final_content]


@pytest.mark.anyio
async def test_a_two_turn_conversation_sends_results_ids_names_and_reasoning_back() -> None:
    """The second request is the cassette's golden: the ids the server issued, tool_name, the
    error result's prefix and the model's own reasoning (same provider and model)."""
    store = InMemoryToolIdStore()
    adapter, replay = replayed("weather_conversation.yaml", store)
    first = golden_request(stream=True)
    turn = final([e async for e in adapter.stream(first)])
    calls = [b for b in turn.final_content if isinstance(b, ToolUseBlock)]
    results = Message.tool(
        ToolResultBlock(tool_use_id=calls[0].id, content="Paris: 21 °C, sunny"),
        ToolResultBlock(
            tool_use_id=calls[1].id, content="the weather service timed out", is_error=True
        ),
    )
    history = [*first.messages, Message.assistant(*turn.final_content), results]
    second = first.model_copy(update={"messages": history})
    answer = final([e async for e in adapter.stream(second)])
    assert replay.remaining == 0
    assert answer.final_content == [
        TextBlock(text="Paris is sunny at 21 °C; Rome's weather is unavailable right now.")
    ]
    assert answer.stop_reason.kind is StopKind.END_TURN


# The stack, over scripted answers ----------------------------------------------------------


@pytest.mark.anyio
async def test_an_error_line_mid_stream_ends_the_stream_then_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return ndjson(line({"content": "Part"}), {"error": "llama runner process has terminated"})

    adapter = ollama_adapter(handler, max_retries=0)
    events: list[StreamEvent] = []
    with pytest.raises(ServerError, match="terminated"):
        async for event in adapter.stream(req(Message.user("hi"))):
            events.append(event)
    complete = final(events)
    assert complete.stop_reason.kind is StopKind.ERROR
    assert complete.final_content == [TextBlock(text="Part")]


@pytest.mark.anyio
async def test_a_model_without_tools_is_a_capability_error_from_the_server() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": f"{GEMMA} does not support tools"})

    adapter = ollama_adapter(handler)
    with pytest.raises(CapabilityError) as caught:
        await adapter.complete(req(Message.user("time?"), tools=[WEATHER]))
    assert caught.value.error_class is ErrorClass.CAPABILITY
    assert caught.value.provider_status == 400 and caught.value.provider == "ollama"


@pytest.mark.anyio
async def test_by_default_tools_are_refused_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []
    adapter = ollama_adapter(lambda r: sent.append(r) or ndjson(), capabilities={})
    with pytest.raises(CapabilityError, match="tool calling"):
        await adapter.complete(req(Message.user("time?"), tools=[WEATHER]))
    assert sent == []


@pytest.mark.anyio
async def test_a_model_that_is_not_pulled_names_the_pull_command() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": "model 'qwen3:8b' not found"})

    with pytest.raises(InvalidRequestError, match="`ollama pull qwen3:8b`"):
        await ollama_adapter(handler).complete(req())


@pytest.mark.anyio
async def test_the_key_is_sent_as_bearer_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return answer(request, line({"content": "hi"}), done("stop"))

    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    await ollama_adapter(handler).complete(req())
    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-cloud-key")
    await ollama_adapter(handler).complete(req())
    assert seen == [None, "Bearer ollama-cloud-key"]


@pytest.mark.anyio
async def test_the_models_own_reasoning_goes_back_through_the_stack_and_no_further(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        thought = line({"content": "", "thinking": "Hmm."})
        return answer(request, thought, line({"content": "4"}), done())

    adapter = ollama_adapter(handler)
    first = final([e async for e in adapter.stream(req(Message.user("2+2?")))])
    history = [Message.user("2+2?"), Message.assistant(*first.final_content), Message.user("+1?")]
    await adapter.complete(req(*history))
    assert bodies[1]["messages"][1] == {"role": "assistant", "content": "4", "thinking": "Hmm."}
    caplog.set_level(logging.WARNING, logger="metis")
    await adapter.complete(req(*history, model="ollama:llama3.1:8b"))
    assert bodies[2]["messages"][1] == {"role": "assistant", "content": "4"}
    dropped = [r for r in caplog.records if getattr(r, "event", "") == "metis.lossy_projection"]
    assert [r.block_type for r in dropped] == ["thinking"]  # type: ignore[attr-defined]


# A conversation that moves between providers -----------------------------------------------


@dataclass
class ScriptedOllama:
    """An Ollama server for tests: refuses what /api/chat refuses with a 400 (wrong types,
    arguments that are not objects, images that are not base64), plus, stricter than Ollama,
    a tool message that does not name the call it answers; answers from a shared script."""

    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        problems = ollama_problems(body)
        if problems:
            return httpx.Response(400, json={"error": "; ".join(problems)})
        return answer(request, *ollama_reply(self.script(Prompt(model=MODEL, turns=[]))))


def ollama_reply(reply: ScriptedReply) -> list[dict[str, Any]]:
    objs = [line({"content": "", "thinking": reply.thinking})] if reply.thinking else []
    objs += [line({"content": word + " "}) for word in reply.text.split(" ") if word]
    for call in reply.calls:
        function = {"name": call.name, "arguments": call.args}
        objs.append(line({"content": "", "tool_calls": [{"function": function}]}))
    return [*objs, done("stop", prompt_eval_count=50, eval_count=10)]


MESSAGE_KEYS = {"role", "content", "images", "tool_calls", "thinking", "tool_name", "tool_call_id"}
BODY_KEYS = {"model", "messages", "tools", "format", "options", "stream", "keep_alive", "think"}


def ollama_problems(body: dict[str, Any]) -> list[str]:
    problems = [f"unknown field {k!r}" for k in body if k not in BODY_KEYS]
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model is required")
    calls: dict[str, str] = {}
    for i, message in enumerate(body["messages"]):
        where = f"messages[{i}]"
        problems += [f"{where}: unknown field {k!r}" for k in message if k not in MESSAGE_KEYS]
        if message["role"] not in ("system", "user", "assistant", "tool"):
            problems.append(f"{where}: invalid role {message['role']!r}")
        if not isinstance(message.get("content", ""), str):
            problems.append(f"{where}: cannot unmarshal content into a string")
        for image in message.get("images") or []:
            try:
                base64.b64decode(image, validate=True)
            except ValueError:
                problems.append(f"{where}: illegal base64 data in images")
        if message["role"] == "assistant":
            calls = {}
            for call in message.get("tool_calls") or []:
                if not isinstance(call["function"].get("arguments"), dict):
                    problems.append(f"{where}: tool call arguments must be an object")
                calls[call.get("id", "")] = call["function"]["name"]
        elif message["role"] == "tool":
            answered = message.get("tool_call_id")
            if calls.get(answered) != message.get("tool_name"):
                problems.append(f"{where}: answers {answered!r} as {message.get('tool_name')!r}")
            calls.pop(answered, None)
        elif calls:
            problems.append(f"{where}: tool calls {sorted(calls)} were not answered")
    return problems


CONVERSATION_TOOLS = [
    WEATHER,
    ToolDefinition(
        name="to_fahrenheit",
        input_schema={"type": "object", "properties": {"celsius": {"type": "number"}}},
    ),
]


def run_tool(call: ToolUseBlock) -> ToolResultBlock:
    if call.name == "get_weather":
        return ToolResultBlock(tool_use_id=call.id, content=f"{call.input['city']}: 21C")
    return ToolResultBlock(tool_use_id=call.id, content="boom", is_error=True)


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_history_made_on_anthropic_and_openai_is_accepted_and_comes_back(
    streaming: bool,
) -> None:
    script = Script(
        [
            thinking("Paris first.", tools(("get_weather", {"city": "Paris"}))),  # anthropic
            tools(("to_fahrenheit", {"celsius": 21}), say="Converting."),  # ollama
            tools(("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Oslo"})),  # openai
            thinking("All done.", text("Paris 70 °F, Rome and Oslo 21C.")),  # ollama
            text("Anything else?"),  # anthropic
            tools(("get_weather", {"city": "Nice"})),  # ollama
            text("Nice: 21C."),  # openai
        ]
    )
    remote = Emulator(model=script, models="any")
    local = ScriptedOllama(script)
    store = InMemoryToolIdStore()
    config = AdapterConfig(api_key="k", http_client=remote.client())
    adapters = {
        name: build_adapter(name, config, tool_id_store=store) for name in ("anthropic", "openai")
    }
    adapters["ollama"] = ollama_adapter(local.handler, store)
    models = {"anthropic": "anthropic:claude-x", "openai": "openai:gpt-x", "ollama": MODEL}
    history = [Message.user("Weather in Paris, in Fahrenheit?")]
    order = ["anthropic", "ollama", "openai", "ollama", "anthropic", "ollama", "openai"]
    for name in order:
        request = CanonicalRequest(
            model=models[name],
            session_id="swap",
            messages=history,
            tools=CONVERSATION_TOOLS,
            max_output_tokens=512,
        )
        response = await respond(adapters[name], request, streaming)
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        if response.tool_calls:
            history.append(Message.tool(*(run_tool(c) for c in response.tool_calls)))
        else:
            history.append(Message.user("And Nice?"))

    assert len(local.requests) == 3 and script.remaining == 0
    assert history[-2].text == "Nice: 21C."
    # Anthropic's call reached Ollama under an id derived from its canonical id, with its name.
    first = next(b for m in history for b in m.content if isinstance(b, ToolUseBlock))
    derived = derive_provider_tool_id(first.id, "call_")
    sent = local.requests[0]["messages"]
    assert sent[1]["tool_calls"][0] == {
        "id": derived,
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
    }
    assert sent[2] == {
        "role": "tool",
        "content": "Paris: 21C",
        "tool_name": "get_weather",
        "tool_call_id": derived,
    }
    assert "thinking" not in sent[1]  # Anthropic's signed reasoning stays with Anthropic
    # The id minted for Ollama's own call goes back to Ollama the same in call and result.
    later = local.requests[1]["messages"]
    own = next(m for m in later if m.get("tool_calls") and m["content"] == "Converting. ")
    answer = next(m for m in later if m.get("tool_name") == "to_fahrenheit")
    assert own["tool_calls"][0]["id"] == answer["tool_call_id"]
    assert answer["content"] == "Error: boom"
    # Ollama's reasoning went to Ollama again, and to nobody else.
    assert any(m.get("thinking") == "All done." for m in local.requests[2]["messages"])
    assert "All done." not in json.dumps(remote.bodies("anthropic")[-1])
    assert "All done." not in json.dumps(remote.bodies("openai")[-1])
    ids = [b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    assert len(ids) == len(set(ids)) == 5 and all(i.startswith("tu_") for i in ids)


async def respond(adapter: Adapter, request: CanonicalRequest, streaming: bool) -> Any:
    if not streaming:
        return await adapter.complete(request)
    complete = final([e async for e in adapter.stream(request)])
    return CanonicalResponse(
        request_id=request.request_id,
        model=request.model,
        provider=adapter.name,
        content=complete.final_content,
        stop_reason=complete.stop_reason,
        usage=complete.usage,
        latency_ms=0,
    )


def test_the_scripted_server_refuses_what_ollama_refuses() -> None:
    bad = {
        "model": "m",
        "stream": False,
        "messages": [
            {"role": "user", "content": ["parts"], "images": ["data:image/png;base64,xx"]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "skipped the result"},
        ],
    }  # fmt: skip
    assert len(ollama_problems(bad)) == 4


# Lifecycle ---------------------------------------------------------------------------------


@dataclass
class FakeServer:
    """An Ollama server's management endpoints, for the lifecycle stage."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: bool = True
    down: bool = False
    seen: list[tuple[str, str, Any]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.seen.append((request.method, request.url.path, body))
        if self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        path = request.url.path
        if path == "/api/version":
            return httpx.Response(200 if self.version else 404, json={"version": "0.11.4"})
        if path == "/api/tags":
            return httpx.Response(200, json={"models": [{"name": m} for m in self.models]})
        if path == "/api/show":
            if body["model"] not in self.models:
                return httpx.Response(404, json={"error": f"model '{body['model']}' not found"})
            return httpx.Response(200, json=self.models[body["model"]])
        if path == "/api/chat" and body["messages"] == []:
            reason = "unload" if body.get("keep_alive") == 0 else "load"
            return httpx.Response(200, json=line({"content": ""}, True, done_reason=reason))
        return answer(request, line({"content": "hi"}), done())


QWEN = {
    "capabilities": ["completion", "tools", "thinking"],
    "model_info": {"qwen3.context_length": 40960},
}


def lifecycle_adapter(server: FakeServer, **config: Any) -> Adapter:
    return ollama_adapter(server.handler, **config)


@pytest.mark.anyio
async def test_init_checks_the_server_and_the_configured_model() -> None:
    server = FakeServer(models={"qwen3:8b": QWEN})
    adapter = lifecycle_adapter(server, settings={"model": MODEL})
    await adapter.init()
    assert [(m, p) for m, p, _ in server.seen] == [("GET", "/api/version"), ("POST", "/api/show")]
    assert server.seen[1][2] == {"model": "qwen3:8b"}
    await adapter.aclose()


@pytest.mark.anyio
async def test_init_without_a_model_only_checks_the_server() -> None:
    server = FakeServer()
    async with lifecycle_adapter(server) as adapter:
        response = await adapter.complete(req())
    assert response.text == "hi"
    assert [p for _, p, _ in server.seen] == ["/api/version", "/api/chat"]


@pytest.mark.anyio
async def test_a_missing_model_names_the_pull_command() -> None:
    adapter = lifecycle_adapter(FakeServer(), settings={"model": "llama3.2"})
    with pytest.raises(InvalidRequestError) as caught:
        await adapter.init()
    assert "`ollama pull llama3.2`" in caught.value.message
    assert BASE in caught.value.message
    assert caught.value.provider_status == 404


@pytest.mark.anyio
async def test_a_server_that_is_down_names_the_url_and_ollama_serve() -> None:
    adapter = lifecycle_adapter(FakeServer(down=True), base_url="http://gpu-box:11434")
    with pytest.raises(NetworkError) as caught:
        async with adapter:
            pass
    assert caught.value.message.startswith("cannot reach the Ollama server at http://gpu-box:11434")
    assert "`ollama serve`" in caught.value.message
    assert caught.value.error_class is ErrorClass.NETWORK and caught.value.provider == "ollama"


@pytest.mark.anyio
async def test_a_call_to_a_server_that_is_down_says_the_same() -> None:
    adapter = lifecycle_adapter(FakeServer(down=True), max_retries=0)
    with pytest.raises(NetworkError) as caught:
        await adapter.complete(req())
    assert BASE in caught.value.message and "`ollama serve`" in caught.value.message
    assert caught.value.request_id is not None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


@pytest.mark.anyio
async def test_other_network_failures_are_left_as_they_are() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("connection reset")

    with pytest.raises(NetworkError) as caught:
        await ollama_adapter(handler, max_retries=0).complete(req())
    assert "ollama serve" not in caught.value.message


@pytest.mark.anyio
async def test_a_server_older_than_api_version_is_checked_with_api_tags() -> None:
    server = FakeServer(version=False)
    await lifecycle_adapter(server).init()
    assert [p for _, p, _ in server.seen] == ["/api/version", "/api/tags"]


@pytest.mark.anyio
async def test_something_that_is_not_ollama_is_reported_with_its_status() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, text="404 page not found")

    with pytest.raises(InvalidRequestError, match="GET http://localhost:11434/api/tags: HTTP 404"):
        await ollama_adapter(handler).init()


@pytest.mark.anyio
async def test_preload_and_unload_with_the_stage_options() -> None:
    server = FakeServer(models={"qwen3:8b": QWEN})
    adapter = lifecycle_adapter(server, settings={"keep_alive": "1h"})
    stage = OllamaLifecycle(model="qwen3:8b", preload=True, unload=True)
    adapter.pipeline.replace("ollama_lifecycle", stage)
    async with adapter:
        pass
    chats = [body for _, path, body in server.seen if path == "/api/chat"]
    assert chats == [
        {"model": "qwen3:8b", "messages": [], "stream": False, "keep_alive": "1h"},
        {"model": "qwen3:8b", "messages": [], "keep_alive": 0, "stream": False},
    ]


@pytest.mark.anyio
async def test_the_unload_waits_within_check_timeout_not_the_call_timeout() -> None:
    """Dispose unloads shielded from cancellation: a server that took the request and never
    answered held ``aclose()`` for the adapter's timeout_seconds (600 s by default), however
    its caller was cancelled; the preload, a model loading, keeps the call's timeout."""
    server = FakeServer(models={"qwen3:8b": QWEN})
    waits: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/chat":
            waits.append(request.extensions["timeout"]["read"])
        return server.handler(request)

    adapter = ollama_adapter(handler, settings={"model": "qwen3:8b"}, timeout_seconds=600)
    stage = OllamaLifecycle(preload=True, unload=True, check_timeout=2)
    adapter.pipeline.replace("ollama_lifecycle", stage)
    async with adapter:
        pass
    loading, unloading = waits
    assert loading > 100 and unloading <= 2


@pytest.mark.anyio
async def test_an_unload_out_of_time_names_check_timeout(caplog: pytest.LogCaptureFixture) -> None:
    """Before: "the call's timeout (600 s) ran out", the adapter's setting, though the wait
    that ran out was check_timeout's (the server here never answers the unload)."""
    server = FakeServer(models={"qwen3:8b": QWEN})

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/chat":
            await anyio.sleep_forever()
        return server.handler(request)

    transport = httpx.MockTransport(handler)
    adapter = ollama_adapter(transport, settings={"model": "qwen3:8b"}, timeout_seconds=600)
    adapter.pipeline.replace("ollama_lifecycle", OllamaLifecycle(unload=True, check_timeout=0.01))
    caplog.set_level(logging.WARNING, logger="metis")
    async with adapter:
        pass
    said = [r.getMessage() for r in caplog.records if "could not unload" in r.getMessage()]
    assert len(said) == 1 and "check_timeout (0.01 s) ran out" in said[0], said
    assert "600" not in said[0] and "unloading qwen3:8b" in said[0], said


@pytest.mark.anyio
async def test_unloading_from_a_server_that_is_gone_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = FakeServer(models={"qwen3:8b": QWEN})
    adapter = lifecycle_adapter(server, settings={"model": "qwen3:8b"})
    adapter.pipeline.replace("ollama_lifecycle", OllamaLifecycle(unload=True))
    await adapter.init()
    server.down = True
    caplog.set_level(logging.WARNING, logger="metis")
    await adapter.aclose()
    assert any("could not unload qwen3:8b" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_init_warns_where_declarations_and_the_server_disagree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    small = {"capabilities": ["completion"], "model_info": {"gemma3.context_length": 32768}}
    server = FakeServer(models={"gemma3:1b": small})
    capabilities = {"supports_tools": True, "max_context_tokens": 65536}
    adapter = lifecycle_adapter(server, settings={"model": "gemma3:1b"}, capabilities=capabilities)
    caplog.set_level(logging.WARNING, logger="metis")
    await adapter.init()
    warned = [
        r.getMessage()
        for r in caplog.records
        if getattr(r, "event", "") == "metis.capability_mismatch"
    ]
    assert len(warned) == 2
    assert "supports_tools" in warned[0] and "'tools'" in warned[0]
    assert "65536" in warned[1] and "32768" in warned[1]


@pytest.mark.anyio
async def test_a_failing_show_is_classified() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/version":
            return httpx.Response(200, json={"version": "0.11.4"})
        return httpx.Response(500, json={"error": "llama runner process has terminated"})

    with pytest.raises(ServerError, match="api/show: HTTP 500"):
        await ollama_adapter(handler, settings={"model": "m"}).init()


# Per-model capabilities in models.yaml -----------------------------------------------------

MODELS_YAML = {
    "adapters": {"local": {"type": "ollama", "settings": {"model": "qwen3:8b"}}},
    "models": {
        "ollama:qwen3:8b": {
            "adapter": "local",
            "aliases": ["local"],
            "capabilities": {"supports_tools": True, "max_context_tokens": 32768},
        },
        "ollama:gemma3:1b": {"adapter": "local"},
    },
}


def test_models_yaml_declares_capabilities_per_local_model() -> None:
    registry = Registry.from_dict(MODELS_YAML, environ={"OLLAMA_API_KEY": "cloud-key"})
    qwen, gemma = registry.resolve("local"), registry.resolve("ollama:gemma3:1b")
    assert qwen.capabilities.supports_tools and qwen.capabilities.max_context_tokens == 32768
    assert not gemma.capabilities.supports_tools
    assert gemma.capabilities.max_context_tokens == 4096
    adapter = registry.adapter("local")
    assert adapter.config.settings == {"model": "qwen3:8b"}


def test_a_local_server_needs_no_key_in_models_yaml() -> None:
    registry = Registry.from_dict(MODELS_YAML, environ={})
    assert registry.status()[0].configured


# Call control on the Ollama stack ----------------------------------------------------------


@pytest.mark.anyio
async def test_cancel_mid_stream_ends_with_the_partial_content() -> None:
    head = [json.dumps(line({"content": "Hel"})) + "\n", json.dumps(line({"content": "lo"})) + "\n"]
    peer = FakePeer(FakeReply(chunks=[*head, STALL]))
    adapter = peer.adapter("ollama")
    request = req(Message.user("hi"), stream=True)
    events: list[StreamEvent] = []

    async def cancel_when_stalled() -> None:
        await peer.stalled.wait()
        assert adapter.cancel(request.request_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_when_stalled)
        async for event in adapter.stream(request):
            events.append(event)
    complete = final(events)
    assert complete.stop_reason.kind is StopKind.CANCELLED
    assert complete.final_content == [TextBlock(text="Hello")]
    assert peer.closed == 1


@pytest.mark.anyio
async def test_a_connection_dropped_mid_stream_ends_the_message_then_raises() -> None:
    peer = FakePeer(FakeReply(chunks=[json.dumps(line({"content": "Part"})) + "\n", DROP]))
    events: list[StreamEvent] = []
    with pytest.raises(NetworkError):
        async for event in peer.adapter("ollama", max_retries=0).stream(req(stream=True)):
            events.append(event)
    assert final(events).stop_reason.kind is StopKind.ERROR
    assert final(events).final_content == [TextBlock(text="Part")]


@pytest.mark.anyio
async def test_a_base_url_of_ollamas_openai_api_says_the_stack_wants_the_servers_root() -> None:
    """A new user gave base_url='http://localhost:11434/v1', as the OpenAI SDK against Ollama
    takes it, and got 'GET .../v1/api/tags: HTTP 404' with no word of why."""
    from metis.testing.emulator import Emulator

    config = AdapterConfig(base_url="http://127.0.0.1:11434/v1", http_client=Emulator().client())
    adapter = build_adapter("ollama", config, init_on_first_call=True)
    with pytest.raises(InvalidRequestError) as caught:
        await adapter.complete(req())
    assert caught.value.__notes__ == [
        "metis: a base URL ending in /v1 is Ollama's OpenAI-compatible API; the ollama stack "
        "speaks Ollama's own, at the server's root: base_url='http://127.0.0.1:11434' (or the "
        "openai_compatible stack at the /v1 URL)"
    ]
    await adapter.aclose()
