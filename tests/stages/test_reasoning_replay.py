"""DeepSeek thinking mode (issue 12 item 2): the openai_chat codec writes reasoning back as
``reasoning_content`` when the stack opts in, only to the provider and model that produced it,
and a thinking-mode tool loop completes against a server that requires it."""

from __future__ import annotations

import json

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import StackError
from metis.model import (
    CanonicalRequest,
    Message,
    ProviderRaw,
    TextBlock,
    ThinkingBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.testing.emulator import Emulator
from metis.wire.codec import get_codec
from metis.wire.openai_chat import codec as plain_codec

from ..helpers import answer, make_call

MODEL = "deepseek:deepseek-reasoner"
CALL = ToolUseBlock(id="call_00_a", name="get_weather", input={"city": "Paris"})


def history(origin: ProviderRaw) -> CanonicalRequest:
    thought = ThinkingBlock(thinking="User wants Paris.", provider_raw=origin)
    return CanonicalRequest(
        model=MODEL,
        messages=[
            Message.user("Weather in Paris?"),
            Message.assistant(thought, CALL),
            Message.tool(ToolResultBlock(tool_use_id=CALL.id, content="sunny")),
        ],
        max_output_tokens=1024,
    )


def assistant_sent(body: dict[str, object]) -> dict[str, object]:
    (message,) = [m for m in body["messages"] if m["role"] == "assistant"]  # type: ignore[attr-defined, index]
    return message  # type: ignore[no-any-return]


def test_own_reasoning_goes_back_in_the_configured_field() -> None:
    codec = get_codec("openai_chat", {"reasoning_field": "reasoning_content"})
    call = make_call(provider="deepseek", model=MODEL)
    body = codec.encode(history(ProviderRaw(provider="deepseek", model=MODEL)), call)
    assert assistant_sent(body) == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "User wants Paris.",
        "tool_calls": [
            {
                "id": "call_00_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    }
    assert call.warnings == []


@pytest.mark.parametrize(
    "origin",
    [
        ProviderRaw(provider="deepseek", model="deepseek:deepseek-chat"),
        ProviderRaw(provider="openrouter", model=MODEL),
    ],
)
def test_reasoning_from_another_model_or_provider_is_dropped(origin: ProviderRaw) -> None:
    codec = get_codec("openai_chat", {"reasoning_field": "reasoning_content"})
    call = make_call(provider="deepseek", model=MODEL)
    body = codec.encode(history(origin), call)
    assert "reasoning_content" not in assistant_sent(body)
    assert [w.block_type for w in call.warnings] == ["thinking"]


def test_without_the_setting_reasoning_is_never_sent() -> None:
    call = make_call(provider="deepseek", model=MODEL)
    body = plain_codec.encode(history(ProviderRaw(provider="deepseek", model=MODEL)), call)
    assert "User wants Paris." not in json.dumps(body)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"reasoning_field": ""}, "reasoning_field"),
        ({"store": True}, "store"),
        ({"reasoning_placeholder": " "}, "one of"),
    ],
)
def test_bad_settings_are_refused_when_the_stack_is_built(
    settings: dict[str, object], named: str
) -> None:
    with pytest.raises(StackError, match=named):
        get_codec("openai_chat", settings)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
async def test_a_thinking_mode_tool_loop_completes(emulator: Emulator, stream: bool) -> None:
    adapter = build_adapter(
        "deepseek", AdapterConfig(api_key="k", base_url=emulator.base_url("openai"))
    )
    weather = ToolDefinition(
        name="get_weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    messages = [Message.user("What's the weather in Paris?")]

    def ask() -> CanonicalRequest:
        return CanonicalRequest(
            model=MODEL,
            messages=messages,
            tools=[weather],
            max_output_tokens=1024,
            thinking=ThinkingConfig(budget_tokens=2048),
        )

    first = await answer(adapter, ask(), stream)
    assert first.content[0].type == "thinking" and first.tool_calls
    messages += [
        Message.assistant(*first.content),
        Message.tool(
            *(ToolResultBlock(tool_use_id=c.id, content="15 C") for c in first.tool_calls)
        ),
    ]
    second = await answer(
        adapter, ask(), stream
    )  # the emulator refuses it without reasoning_content
    assert second.text and second.warnings == []
    await adapter.aclose()


def test_the_emulator_refuses_a_tool_turn_without_its_reasoning(emulator: Emulator) -> None:
    body = {
        "model": "deepseek-reasoner",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
    }
    reply = httpx.post(
        emulator.base_url("openai") + "/v1/chat/completions",
        json=body,
        headers={"authorization": "Bearer k"},
    )
    assert reply.status_code == 400
    assert "reasoning_content in the thinking mode must be passed back" in reply.text


def test_thinking_filter_may_let_unsigned_reasoning_through_to_its_own_model() -> None:
    from metis.stages.policy.thinking_filter import ThinkingFilter

    call = make_call(provider="deepseek", model=MODEL)
    own = history(ProviderRaw(provider="deepseek", model=MODEL))
    assert ThinkingFilter(signed_only=False).rewrite(own, call) is own
    kept = ThinkingFilter().rewrite(own, call)  # the default: unsigned reasoning is dropped
    assert [b.type for b in kept.messages[1].content] == ["tool_use"]
    other = history(ProviderRaw(provider="deepseek", model="deepseek:deepseek-chat"))
    dropped = ThinkingFilter(signed_only=False).rewrite(other, call)
    assert [b.type for b in dropped.messages[1].content] == ["tool_use"]


def test_a_tool_call_turn_made_elsewhere_carries_the_placeholder() -> None:
    codec = get_codec(
        "openai_chat", {"reasoning_field": "reasoning_content", "reasoning_placeholder": " "}
    )
    call = make_call(provider="deepseek", model=MODEL)
    body = codec.encode(history(ProviderRaw(provider="anthropic", model="anthropic:c")), call)
    assert assistant_sent(body)["reasoning_content"] == " "  # never the other model's text
    assert "User wants Paris." not in json.dumps(body)
    plain = CanonicalRequest(
        model=MODEL,
        messages=[Message.user("hi"), Message.assistant("Hello!"), Message.user("bye")],
        max_output_tokens=64,
    )
    assert "reasoning_content" not in assistant_sent(codec.encode(plain, call))  # no tool call


def test_pre_send_check_knows_the_thinking_mode_rule() -> None:
    from metis.wire.rules import deepseek_problems

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    problems = deepseek_problems({"model": "deepseek-reasoner", "messages": messages})
    assert problems == [
        "messages[1].reasoning_content: thinking mode needs it back on every assistant "
        "message that made tool calls"
    ]
    assert deepseek_problems({"model": "deepseek-chat", "messages": messages}) == []
    messages[1]["reasoning_content"] = " "
    assert deepseek_problems({"model": "deepseek-reasoner", "messages": messages}) == []


def test_mistral_gets_its_own_reasoning_back_as_typed_content_chunks() -> None:
    codec = get_codec("openai_chat", {"reasoning_in_content": True})
    model = "mistral:magistral-medium-latest"
    call = make_call(provider="mistral", model=model)
    request = history(ProviderRaw(provider="mistral", model=model))
    said = request.messages[1].model_copy(
        update={"content": [*request.messages[1].content[:1], TextBlock(text="Checking."), CALL]}
    )
    body = codec.encode(request.model_copy(update={"messages": [request.messages[0], said]}), call)
    sent = assistant_sent(body)
    assert sent["content"] == [
        {"type": "thinking", "thinking": [{"type": "text", "text": "User wants Paris."}]},
        {"type": "text", "text": "Checking."},
    ]
    assert "reasoning_content" not in sent and sent["tool_calls"]
    other = codec.encode(history(ProviderRaw(provider="mistral", model="mistral:other")), call)
    assert assistant_sent(other)["content"] is None  # another model's reasoning stays home
