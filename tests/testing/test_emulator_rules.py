"""Every request the emulator refuses, one case per rule: the spec of each API's 400s (and its
401s and 403s) as the emulator enforces them.

Each case starts from a valid request of its format, breaks one rule, and checks the status and
a fragment of the provider's own message. The valid requests themselves are checked to pass,
so a case fails only for the rule it breaks.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import httpx
import pytest

from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.responses_rules import encrypt

Body = dict[str, Any]

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
STRICT_BAD = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
NESTED_BAD = {
    "type": "object",
    "additionalProperties": False,
    "required": ["where"],
    "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


class Base(NamedTuple):
    path: str
    headers: dict[str, str]
    body: Body


BASES = {
    "anthropic": Base(
        "/v1/messages",
        {"x-api-key": "k", "anthropic-version": "2023-06-01"},
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 2048,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ),
    "anthropic_count": Base(
        "/v1/messages/count_tokens",
        {"x-api-key": "k", "anthropic-version": "2023-06-01"},
        {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "chat": Base(
        "/v1/chat/completions",
        {"authorization": "Bearer k"},
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "responses": Base(
        "/v1/responses", {"authorization": "Bearer k"}, {"model": "gpt-4o", "input": "hi"}
    ),
    "input_tokens": Base(
        "/v1/responses/input_tokens",
        {"authorization": "Bearer k"},
        {"model": "gpt-4o", "input": "hi"},
    ),
    "gemini": Base(
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"x-goog-api-key": "k"},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
    "gemini3": Base(
        "/v1beta/models/gemini-3-pro-preview:generateContent",
        {"x-goog-api-key": "k"},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
    "ollama": Base(
        "/api/chat",
        {},
        {"model": "qwen3", "stream": False, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "ollama_show": Base("/api/show", {}, {"model": "qwen3"}),
    "converse": Base(
        "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/converse",
        {"authorization": "Bearer bedrock-key"},
        {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
    ),
    "invoke": Base(
        "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/invoke",
        {"authorization": "Bearer bedrock-key"},
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 2048,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ),
    "bedrock_count": Base(
        "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/count-tokens",
        {"authorization": "Bearer bedrock-key"},
        {"input": {"converse": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}}},
    ),
    "vertex_claude": Base(
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict",
        {"authorization": "Bearer ya29.token"},
        {
            "anthropic_version": "vertex-2023-10-16",
            "max_tokens": 2048,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ),
    "vertex_gemini": Base(
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent",
        {"authorization": "Bearer ya29.token"},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
    "azure_chat": Base(
        "/azure/openai/v1/chat/completions",
        {"api-key": "k"},
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "azure_responses": Base(
        "/azure/openai/v1/responses", {"api-key": "k"}, {"model": "gpt-4o", "input": "hi"}
    ),
}


class Case(NamedTuple):
    base: str
    change: Callable[[Body], Any]
    status: int
    fragment: str
    headers: dict[str, str | None] = {}


def put(**fields: Any) -> Callable[[Body], Body]:
    """The base body with ``fields`` set (a value of ``...`` removes the field)."""

    def change(body: Body) -> Body:
        for key, value in fields.items():
            if value is ...:
                body.pop(key, None)
            else:
                body[key] = value
        return body

    return change


def same(body: Body) -> Body:
    return body


def user(content: Any) -> Body:
    return {"role": "user", "content": content}


def assistant(content: Any) -> Body:
    return {"role": "assistant", "content": content}


# --- Anthropic Messages --------------------------------------------------------------------

A_TOOL = {"name": "get_weather", "description": "Weather", "input_schema": WEATHER}
A_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
A_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
A_LOOP = [user("hi"), assistant([A_USE]), user([A_RESULT])]
A_THINK = {"type": "enabled", "budget_tokens": 1024}


ANTHROPIC = {
    "a-no-key": Case("anthropic", same, 401, "x-api-key header is required", {"x-api-key": None}),
    "a-no-version": Case(
        "anthropic", same, 400, "anthropic-version: header is required", {"anthropic-version": None}
    ),
    "a-bad-version": Case(
        "anthropic",
        same,
        400,
        "anthropic-version: invalid version",
        {"anthropic-version": "2099-01-01"},
    ),
    "a-not-json": Case("anthropic", lambda b: b"{", 400, "not valid JSON"),
    "a-not-object": Case("anthropic", lambda b: [1], 400, "must be a JSON object"),
    "a-extra-field": Case("anthropic", put(n=2), 400, "n: Extra inputs are not permitted"),
    "a-no-model": Case("anthropic", put(model=...), 400, "model: Field required"),
    "a-no-max-tokens": Case("anthropic", put(max_tokens=...), 400, "max_tokens: Field required"),
    "a-max-tokens-zero": Case(
        "anthropic",
        put(max_tokens=0),
        400,
        "max_tokens: Input should be greater than or equal to 1",
    ),
    "a-stream-not-bool": Case(
        "anthropic", put(stream="yes"), 400, "stream: Input should be a valid boolean"
    ),
    "a-temperature-range": Case(
        "anthropic",
        put(temperature=1.5),
        400,
        "temperature: Input should be less than or equal to 1",
    ),
    "a-opus-47-sampling": Case(
        "anthropic",
        put(model="claude-opus-4-7", top_p=0.5),
        400,
        "`top_p` is deprecated for this model.",
    ),
    "a-opus-47-manual-thinking": Case(
        "anthropic",
        put(model="claude-opus-4-7", thinking=A_THINK),
        400,
        "'enabled' is not supported for this model",
    ),
    "a-system-block-type": Case(
        "anthropic", put(system=[{"type": "image"}]), 400, "system.0.type: Input should be 'text'"
    ),
    "a-system-block-text": Case(
        "anthropic", put(system=[{"type": "text"}]), 400, "system.0.text: Field required"
    ),
    "a-system-type": Case(
        "anthropic",
        put(system=5),
        400,
        "system: Input should be a valid string or a list of text blocks",
    ),
    "a-tools-not-list": Case(
        "anthropic", put(tools={}), 400, "tools: Input should be a valid list"
    ),
    "a-tool-not-dict": Case(
        "anthropic", put(tools=[1]), 400, "tools.0: Input should be a valid dictionary"
    ),
    "a-server-tool-name": Case(
        "anthropic",
        put(tools=[{"type": "web_search_20250305"}]),
        400,
        "tools.0.name: Field required",
    ),
    "a-tool-name-pattern": Case(
        "anthropic",
        put(tools=[{**A_TOOL, "name": "get weather"}]),
        400,
        "tools.0.custom.name: String should match pattern",
    ),
    "a-tool-no-schema": Case(
        "anthropic", put(tools=[{"name": "f"}]), 400, "tools.0.custom.input_schema: Field required"
    ),
    "a-tool-schema-type": Case(
        "anthropic",
        put(tools=[{"name": "f", "input_schema": {"type": "array"}}]),
        400,
        "tools.0.custom.input_schema.type: Input should be 'object'",
    ),
    "a-tool-names-unique": Case(
        "anthropic", put(tools=[A_TOOL, A_TOOL]), 400, "Tool names must be unique."
    ),
    "a-tool-choice-without-tools": Case(
        "anthropic",
        put(tool_choice={"type": "auto"}),
        400,
        "tool_choice may only be specified while providing tools.",
    ),
    "a-tool-choice-tag": Case(
        "anthropic",
        put(tools=[A_TOOL], tool_choice={"type": "some"}),
        400,
        "tool_choice: Input tag found using 'type' does not match",
    ),
    "a-tool-choice-none-parallel": Case(
        "anthropic",
        put(tools=[A_TOOL], tool_choice={"type": "none", "disable_parallel_tool_use": True}),
        400,
        "tool_choice.none.disable_parallel_tool_use: Extra inputs",
    ),
    "a-tool-choice-tool-name": Case(
        "anthropic",
        put(tools=[A_TOOL], tool_choice={"type": "tool"}),
        400,
        "tool_choice.tool.name: Field required",
    ),
    "a-tool-choice-unknown-tool": Case(
        "anthropic",
        put(tools=[A_TOOL], tool_choice={"type": "tool", "name": "other"}),
        400,
        "Tool 'other' not found in tools.",
    ),
    "a-thinking-tag": Case(
        "anthropic",
        put(thinking={"type": "on"}),
        400,
        "thinking: Input tag found using 'type' does not match",
    ),
    "a-thinking-no-budget": Case(
        "anthropic",
        put(thinking={"type": "enabled"}),
        400,
        "thinking.enabled.budget_tokens: Field required",
    ),
    "a-thinking-small-budget": Case(
        "anthropic",
        put(thinking={"type": "enabled", "budget_tokens": 100}),
        400,
        "budget_tokens: Input should be greater than or equal to 1024",
    ),
    "a-thinking-budget-over-max": Case(
        "anthropic",
        put(max_tokens=1024, thinking=A_THINK),
        400,
        "`max_tokens` must be greater than `thinking.budget_tokens`",
    ),
    "a-thinking-temperature": Case(
        "anthropic",
        put(thinking=A_THINK, temperature=0.5),
        400,
        "`temperature` may only be set to 1 when thinking is enabled",
    ),
    "a-thinking-forced-tool": Case(
        "anthropic",
        put(thinking=A_THINK, tools=[A_TOOL], tool_choice={"type": "any"}),
        400,
        "Thinking may not be enabled when tool_choice forces tool use.",
    ),
    "a-thinking-top-k": Case(
        "anthropic",
        put(thinking=A_THINK, top_k=5),
        400,
        "`top_k` may not be set when thinking is enabled.",
    ),
    "a-thinking-turn-opening": Case(
        "anthropic",
        put(thinking=A_THINK, tools=[A_TOOL], messages=A_LOOP),
        400,
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, "
        "but found `tool_use`",
    ),
    "a-no-messages": Case("anthropic", put(messages=...), 400, "messages: Field required"),
    "a-messages-not-list": Case(
        "anthropic", put(messages={}), 400, "messages: Input should be a valid list"
    ),
    "a-messages-empty": Case(
        "anthropic", put(messages=[]), 400, "messages: at least one message is required"
    ),
    "a-message-not-dict": Case(
        "anthropic", put(messages=[1]), 400, "messages.0: Input should be a valid dictionary"
    ),
    "a-message-role": Case(
        "anthropic",
        put(messages=[{"role": "bot", "content": "hi"}]),
        400,
        "messages.0.role: Input should be 'user', 'assistant' or 'system'",
    ),
    "a-message-no-content": Case(
        "anthropic", put(messages=[{"role": "user"}]), 400, "messages.0.content: Field required"
    ),
    "a-message-content-type": Case(
        "anthropic",
        put(messages=[user(5)]),
        400,
        "messages.0.content: Input should be a valid string or list",
    ),
    "a-block-not-dict": Case(
        "anthropic",
        put(messages=[user([1])]),
        400,
        "messages.0.content.0: Input should be a valid dictionary with a 'type'",
    ),
    "a-block-type": Case(
        "anthropic",
        put(messages=[user([{"type": "video"}])]),
        400,
        "messages.0.content.0: Input tag 'video' found using 'type'",
    ),
    "a-text-block-text": Case(
        "anthropic",
        put(messages=[user([{"type": "text"}])]),
        400,
        "messages.0.content.0.text.text: Field required",
    ),
    "a-tool-use-in-user": Case(
        "anthropic",
        put(messages=[user([A_USE])]),
        400,
        "`tool_use` blocks can only be in `assistant` messages",
    ),
    "a-tool-use-fields": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([{"type": "tool_use", "input": {}}])]),
        400,
        "messages.1.content.0.tool_use: `id` and `name` are required",
    ),
    "a-tool-use-input": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([{**A_USE, "input": "x"}])]),
        400,
        "messages.1.content.0.tool_use.input: Input should be a valid dictionary",
    ),
    "a-tool-result-in-assistant": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([A_RESULT])]),
        400,
        "`tool_result` blocks can only be in `user` messages",
    ),
    "a-tool-result-id": Case(
        "anthropic",
        put(messages=[user([{"type": "tool_result"}])]),
        400,
        "messages.0.content.0.tool_result.tool_use_id: Field required",
    ),
    "a-thinking-in-user": Case(
        "anthropic",
        put(messages=[user([{"type": "thinking", "thinking": "x", "signature": "s"}])]),
        400,
        "`thinking` blocks can only be in `assistant` messages",
    ),
    "a-thinking-fields": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([{"type": "thinking"}])]),
        400,
        "`thinking` and `signature` are required",
    ),
    "a-thinking-signature": Case(
        "anthropic",
        put(
            messages=[
                user("hi"),
                assistant([{"type": "thinking", "thinking": "x", "signature": "forged"}]),
                user("more"),
            ]
        ),
        400,
        "Invalid `signature` in `thinking` block",
    ),
    "a-redacted-in-user": Case(
        "anthropic",
        put(messages=[user([{"type": "redacted_thinking", "data": "x"}])]),
        400,
        "`redacted_thinking` blocks can only be in `assistant` messages",
    ),
    "a-tool-use-unanswered": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([A_USE]), user("and?")]),
        400,
        "messages.1: `tool_use` ids were found without `tool_result` blocks "
        "immediately after: toolu_1",
    ),
    "a-tool-result-stray": Case(
        "anthropic",
        put(messages=[user([A_RESULT])]),
        400,
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1",
    ),
    "a-trailing-open-call": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([A_USE])]),
        400,
        "messages.1: `tool_use` ids were found without `tool_result` blocks",
    ),
    "a-server-result-without-call": Case(
        "anthropic",
        put(
            messages=[
                user("hi"),
                assistant([{"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1"}]),
            ]
        ),
        400,
        "messages.1.content.0: `web_search_tool_result` block(s) provided when the message does "
        "not have a corresponding `server_tool_use` block with id 'srvtoolu_1' before it",
    ),
    "a-count-extra-field": Case(
        "anthropic_count", put(stream=True, n=1), 400, "n: Extra inputs are not permitted"
    ),
    "a-count-no-messages": Case(
        "anthropic_count", put(messages=...), 400, "messages: Field required"
    ),
}

# --- OpenAI Chat Completions ---------------------------------------------------------------

C_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}
C_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": "{}"},
}


def c_calls(*calls: Any) -> list[Body]:
    return [user("hi"), {"role": "assistant", "tool_calls": list(calls)}]


CHAT = {
    "c-no-key": Case("chat", same, 401, "You didn't provide an API key", {"authorization": None}),
    "c-not-bearer": Case(
        "chat", same, 401, "You didn't provide an API key", {"authorization": "Basic abc"}
    ),
    "c-not-json": Case("chat", lambda b: b"nope", 400, "not valid JSON"),
    "c-unknown-argument": Case(
        "chat", put(foo=1), 400, "Unrecognized request argument supplied: foo"
    ),
    "c-no-model": Case("chat", put(model=...), 400, "you must provide a model parameter"),
    # a value that is not there is named as null is, never by the rules engine's own marker
    "c-message-without-role": Case(
        "chat", put(messages=[{"content": "hi"}]), 400, "Invalid value: 'None'. Supported"
    ),
    "c-stream-type": Case(
        "chat", put(stream="yes"), 400, "Invalid type for 'stream': expected a boolean"
    ),
    "c-stream-options-without-stream": Case(
        "chat",
        put(stream_options={"include_usage": True}),
        400,
        "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
    ),
    "c-temperature-type": Case(
        "chat", put(temperature="hot"), 400, "Invalid type for 'temperature': expected a decimal"
    ),
    "c-temperature-max": Case(
        "chat", put(temperature=2.5), 400, "decimal above maximum value. Expected a value <= 2"
    ),
    "c-temperature-min": Case(
        "chat", put(temperature=-0.5), 400, "decimal below minimum value. Expected a value >= 0"
    ),
    "c-reasoning-max-tokens": Case(
        "chat",
        put(model="o3", max_tokens=100),
        400,
        "Unsupported parameter: 'max_tokens' is not supported with this model.",
    ),
    "c-max-tokens-min": Case(
        "chat",
        put(max_completion_tokens=0),
        400,
        "Invalid 'max_tokens': integer below minimum value.",
    ),
    "c-tools-not-list": Case(
        "chat", put(tools={}), 400, "Invalid type for 'tools': expected an array."
    ),
    "c-tool-not-object": Case(
        "chat", put(tools=[1]), 400, "Invalid type for 'tools[0]': expected an object."
    ),
    "c-tool-type": Case(
        "chat",
        put(tools=[{"type": "web"}]),
        400,
        "Invalid value: 'web'. Supported values are: 'function' and 'custom'.",
    ),
    "c-tool-no-function": Case(
        "chat",
        put(tools=[{"type": "function"}]),
        400,
        "Missing required parameter: 'tools[0].function'.",
    ),
    "c-tool-no-name": Case(
        "chat",
        put(tools=[{"type": "function", "function": {}}]),
        400,
        "Missing required parameter: 'tools[0].function.name'.",
    ),
    "c-tool-name-pattern": Case(
        "chat",
        put(tools=[{"type": "function", "function": {"name": "a b"}}]),
        400,
        "Invalid 'tools[0].function.name': string does not match pattern.",
    ),
    "c-tool-parameters-type": Case(
        "chat",
        put(tools=[{"type": "function", "function": {"name": "f", "parameters": []}}]),
        400,
        "Invalid type for 'tools[0].function.parameters': expected an object.",
    ),
    "c-strict-additional-properties": Case(
        "chat",
        put(
            tools=[
                {
                    "type": "function",
                    "function": {"name": "f", "strict": True, "parameters": STRICT_BAD},
                }
            ]
        ),
        400,
        "'additionalProperties' is required to be supplied and to be false",
    ),
    "c-strict-required": Case(
        "chat",
        put(
            tools=[
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "strict": True,
                        "parameters": {**WEATHER, "additionalProperties": False},
                    },
                }
            ]
        ),
        400,
        "'required' is required to be supplied and to be an array including every key "
        "in properties. Missing 'city'.",
    ),
    "c-strict-nested": Case(
        "chat",
        put(
            tools=[
                {
                    "type": "function",
                    "function": {"name": "f", "strict": True, "parameters": NESTED_BAD},
                }
            ]
        ),
        400,
        "In context=('properties', 'where'), 'additionalProperties' is required",
    ),
    "c-tool-choice-without-tools": Case(
        "chat",
        put(tool_choice="auto"),
        400,
        "'tool_choice' is only allowed when 'tools' are specified.",
    ),
    "c-tool-choice-unknown-function": Case(
        "chat",
        put(tools=[C_TOOL], tool_choice={"type": "function", "function": {"name": "other"}}),
        400,
        "function 'other' is not present in 'tools'.",
    ),
    "c-tool-choice-value": Case(
        "chat",
        put(tools=[C_TOOL], tool_choice="always"),
        400,
        "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named function.",
    ),
    "c-no-messages": Case(
        "chat", put(messages=...), 400, "Missing required parameter: 'messages'."
    ),
    "c-messages-type": Case(
        "chat", put(messages={}), 400, "Invalid type for 'messages': expected an array of objects."
    ),
    "c-messages-empty": Case("chat", put(messages=[]), 400, "Invalid 'messages': empty array."),
    "c-message-type": Case(
        "chat", put(messages=[1]), 400, "Invalid type for 'messages[0]': expected an object."
    ),
    "c-message-role": Case(
        "chat",
        put(messages=[{"role": "bot", "content": "hi"}]),
        400,
        "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', "
        "'function', 'tool', and 'developer'.",
    ),
    "c-calls-then-not-tool": Case(
        "chat",
        put(messages=[*c_calls(C_CALL), user("and?")]),
        400,
        "The following tool_call_ids did not have response messages: call_1",
    ),
    "c-message-no-content": Case(
        "chat",
        put(messages=[{"role": "user"}]),
        400,
        "Missing required parameter: 'messages[0].content'.",
    ),
    "c-content-part-type": Case(
        "chat",
        put(messages=[user([{"type": "video"}])]),
        400,
        "Invalid value: 'video'. Supported values are: 'text', 'image_url'",
    ),
    "c-content-type": Case(
        "chat",
        put(messages=[user(5)]),
        400,
        "Invalid type for 'messages[0].content': expected one of a string or array of objects.",
    ),
    "c-tool-message-no-id": Case(
        "chat",
        put(messages=[*c_calls(C_CALL), {"role": "tool", "content": "x"}]),
        400,
        "Missing required parameter: 'messages[2].tool_call_id'.",
    ),
    "c-tool-message-first": Case(
        "chat",
        put(messages=[{"role": "tool", "tool_call_id": "call_1", "content": "x"}]),
        400,
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    ),
    "c-tool-message-unknown-id": Case(
        "chat",
        put(
            messages=[*c_calls(C_CALL), {"role": "tool", "tool_call_id": "call_9", "content": "x"}]
        ),
        400,
        "'tool_call_id' of 'call_9' not found in 'tool_calls' of previous message.",
    ),
    "c-tool-calls-type": Case(
        "chat",
        put(messages=[user("hi"), {"role": "assistant", "tool_calls": {"id": "x"}}]),
        400,
        "Invalid type for 'messages[1].tool_calls': expected an array.",
    ),
    "c-tool-call-id": Case(
        "chat",
        put(messages=c_calls({"function": {"name": "f", "arguments": "{}"}})),
        400,
        "Missing required parameter: 'messages[1].tool_calls[0].id'.",
    ),
    "c-tool-call-function": Case(
        "chat",
        put(messages=c_calls({"id": "call_1"})),
        400,
        "Missing required parameter: 'messages[1].tool_calls[0].function'.",
    ),
    "c-tool-call-arguments": Case(
        "chat",
        put(messages=c_calls({**C_CALL, "function": {"name": "f", "arguments": {}}})),
        400,
        "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string",
    ),
    "c-trailing-open-call": Case(
        "chat", put(messages=c_calls(C_CALL)), 400, "did not have response messages: call_1"
    ),
    "c-deepseek-reasoning-back": Case(
        "chat",
        put(
            model="deepseek-reasoner",
            messages=[*c_calls(C_CALL), {"role": "tool", "tool_call_id": "call_1", "content": "x"}],
        ),
        400,
        "The reasoning_content in the thinking mode must be passed back to the API.",
    ),
    "c-json-schema-name": Case(
        "chat",
        put(response_format={"type": "json_schema", "json_schema": {"schema": WEATHER}}),
        400,
        "Missing required parameter: 'response_format.json_schema.name'.",
    ),
    "c-json-schema-strict": Case(
        "chat",
        put(
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "w", "strict": True, "schema": STRICT_BAD},
            }
        ),
        400,
        "Invalid schema for response_format 'w'",
    ),
    "c-json-object-word": Case(
        "chat",
        put(response_format={"type": "json_object"}),
        400,
        "'messages' must contain the word 'json' in some form",
    ),
}

# --- OpenAI Responses ----------------------------------------------------------------------

_SEALED = encrypt("Thinking.")
R_TOOL = {"type": "function", "name": "get_weather", "parameters": WEATHER}
R_CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
R_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}

RESPONSES = {
    "r-no-key": Case(
        "responses", same, 401, "You didn't provide an API key", {"authorization": None}
    ),
    "r-unknown-parameter": Case("responses", put(foo=1), 400, "Unknown parameter: 'foo'."),
    "r-no-model": Case("responses", put(model=...), 400, "Missing required parameter: 'model'."),
    "r-message-without-role": Case(
        "responses", put(input=[{"content": "hi"}]), 400, "Invalid value: 'None'. Supported"
    ),
    "r-developer-output-part": Case(
        "responses",
        put(input=[{"role": "developer", "content": [{"type": "output_text", "text": "x"}]}]),
        400,
        "Invalid value: 'output_text'. Supported values are: 'input_text'",
    ),
    "r-reasoning-content-kept": Case(
        "responses",
        put(input=[{"type": "reasoning", "summary": [], "content": [5]}]),
        400,
        "Missing required parameter: 'input[0].id'.",
    ),
    "r-temperature-type": Case(
        "responses", put(temperature="hot"), 400, "Invalid type for 'temperature'"
    ),
    "r-temperature-max": Case("responses", put(temperature=3), 400, "decimal above maximum value"),
    "r-temperature-min": Case("responses", put(temperature=-1), 400, "decimal below minimum value"),
    "r-max-output-tokens": Case(
        "responses",
        put(max_output_tokens=8),
        400,
        "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16",
    ),
    "r-stream-type": Case(
        "responses", put(stream=1), 400, "Invalid type for 'stream': expected a boolean."
    ),
    "r-previous-not-found": Case(
        "responses",
        put(previous_response_id="resp_missing"),
        400,
        "Previous response with id 'resp_missing' not found.",
    ),
    "r-no-input": Case("responses", put(input=...), 400, "Missing required parameter: 'input'."),
    "r-input-type": Case(
        "responses",
        put(input=5),
        400,
        "Invalid type for 'input': expected one of a string or array of input items.",
    ),
    "r-tools-type": Case(
        "responses", put(tools={}), 400, "Invalid type for 'tools': expected an array."
    ),
    "r-tool-type-missing": Case(
        "responses", put(tools=[{"name": "f"}]), 400, "Missing required parameter: 'tools[0].type'."
    ),
    "r-tool-name": Case(
        "responses",
        put(tools=[{"type": "function", "function": {"name": "f"}}]),
        400,
        "Missing required parameter: 'tools[0].name'.",
    ),
    "r-tool-parameters-type": Case(
        "responses",
        put(tools=[{"type": "function", "name": "f", "parameters": []}]),
        400,
        "Invalid type for 'tools[0].parameters': expected an object.",
    ),
    "r-tool-strict": Case(
        "responses",
        put(tools=[{**R_TOOL, "strict": True, "parameters": STRICT_BAD}]),
        400,
        "Invalid schema for function 'get_weather'",
    ),
    "r-tool-choice-unknown": Case(
        "responses",
        put(tools=[R_TOOL], tool_choice={"type": "function", "name": "other"}),
        400,
        "Tool choice 'other' not found in 'tools' parameter.",
    ),
    "r-tool-choice-value": Case(
        "responses", put(tool_choice="always"), 400, "Invalid value for 'tool_choice'."
    ),
    "r-item-type": Case(
        "responses", put(input=[1]), 400, "Invalid type for 'input[0]': expected an object."
    ),
    "r-item-role": Case(
        "responses",
        put(input=[{"role": "bot", "content": "hi"}]),
        400,
        "Invalid value: 'bot'. Supported values are: 'assistant', 'system', "
        "'developer', and 'user'.",
    ),
    "r-item-content": Case(
        "responses",
        put(input=[{"role": "user"}]),
        400,
        "Missing required parameter: 'input[0].content'.",
    ),
    "r-call-id": Case(
        "responses",
        put(input=[{"type": "function_call", "name": "f", "arguments": "{}"}]),
        400,
        "Missing required parameter: 'input[0].call_id'.",
    ),
    "r-call-arguments": Case(
        "responses",
        put(input=[{**R_CALL, "arguments": {}}, R_OUTPUT]),
        400,
        "Invalid type for 'input[0].arguments': expected a string.",
    ),
    "r-output-call-id": Case(
        "responses",
        put(input=[{"type": "function_call_output", "output": "x"}]),
        400,
        "Missing required parameter: 'input[0].call_id'.",
    ),
    "r-output-without-call": Case(
        "responses",
        put(input=[R_OUTPUT]),
        400,
        "No tool call found for function call output with call_id call_1.",
    ),
    "r-reasoning-id": Case(
        "responses",
        put(input=[{"type": "reasoning", "summary": []}]),
        400,
        "Missing required parameter: 'input[0].id'.",
    ),
    "r-reasoning-encrypted": Case(
        "responses",
        put(
            input=[
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "encrypted_content": "gAAAAABforged",
                },
                user("hi"),
            ]
        ),
        400,
        "The encrypted content for item rs_1 could not be verified.",
    ),
    "r-reasoning-not-stored": Case(
        "responses",
        put(input=[{"type": "reasoning", "id": "rs_unknown", "summary": []}, user("hi")]),
        400,
        "Item with id 'rs_unknown' not found.",
    ),
    "r-call-unanswered": Case(
        "responses",
        put(input=[user("hi"), R_CALL]),
        400,
        "No tool output found for function call call_1.",
    ),
    "r-format-name": Case(
        "responses",
        put(text={"format": {"type": "json_schema", "schema": WEATHER}}),
        400,
        "Missing required parameter: 'text.format.name'.",
    ),
    "r-format-strict": Case(
        "responses",
        put(
            text={
                "format": {"type": "json_schema", "name": "w", "strict": True, "schema": STRICT_BAD}
            }
        ),
        400,
        "Invalid schema for response_format 'w'",
    ),
    "r-count-unknown-parameter": Case(
        "input_tokens", put(stream=True), 400, "Unknown parameter: 'stream'."
    ),
    "r-count-no-input": Case(
        "input_tokens", put(input=...), 400, "Missing required parameter: 'input'."
    ),
}

# --- Gemini --------------------------------------------------------------------------------

G_CALL = {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {}}}]}
G_RESPONSE = {
    "role": "user",
    "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}],
}
G_USER = {"role": "user", "parts": [{"text": "hi"}]}
G_TOOLS = [{"functionDeclarations": [{"name": "get_weather", "parameters": WEATHER}]}]

GEMINI = {
    "g-no-key": Case(
        "gemini", same, 403, "Method doesn't allow unregistered callers", {"x-goog-api-key": None}
    ),
    "g-not-json": Case("gemini", lambda b: b"{", 400, "not valid JSON"),
    "g-unknown-field": Case(
        "gemini",
        put(foo=1),
        400,
        'Invalid JSON payload received. Unknown name "foo": Cannot find field.',
    ),
    "g-no-contents": Case("gemini", put(contents=[]), 400, "contents is not specified"),
    "g-config-type": Case(
        "gemini",
        put(generationConfig=5),
        400,
        "Invalid value at 'generation_config': expected an object.",
    ),
    "g-temperature": Case(
        "gemini",
        put(generationConfig={"temperature": 3}),
        400,
        "generation_config.temperature: must be in [0.0, 2.0]",
    ),
    "g-tools-type": Case(
        "gemini", put(tools={}), 400, "Invalid value at 'tools': expected a list."
    ),
    "g-function-name": Case(
        "gemini",
        put(tools=[{"functionDeclarations": [{"name": "1f"}]}]),
        400,
        "tools[0].function_declarations[0].name: Invalid function name.",
    ),
    "g-content-type": Case(
        "gemini", put(contents=[1]), 400, "Invalid value at 'contents[0]': expected an object."
    ),
    "g-role": Case(
        "gemini",
        put(contents=[{"role": "bot", "parts": [{"text": "hi"}]}]),
        400,
        "Please use a valid role: user, model.",
    ),
    "g-parts-empty": Case(
        "gemini",
        put(contents=[{"role": "user", "parts": []}]),
        400,
        "contents[0].parts: contents.parts must not be empty.",
    ),
    "g-part-type": Case(
        "gemini",
        put(contents=[{"role": "user", "parts": [1]}]),
        400,
        "Invalid value at 'contents[0].parts[0]': expected an object.",
    ),
    "g-part-field": Case(
        "gemini",
        put(contents=[{"role": "user", "parts": [{"txt": "hi"}]}]),
        400,
        "Unknown name \"txt\" at 'contents[0].parts[0]': Cannot find field.",
    ),
    "g-call-name": Case(
        "gemini",
        put(contents=[G_USER, {"role": "model", "parts": [{"functionCall": {"args": {}}}]}]),
        400,
        "contents[1].parts[0].function_call.name: Name cannot be empty.",
    ),
    "g-call-turn-order": Case(
        "gemini",
        put(
            tools=G_TOOLS,
            contents=[G_USER, {"role": "model", "parts": [{"text": "ok"}]}, G_CALL, G_RESPONSE],
        ),
        400,
        "Please ensure that function call turn comes immediately after a user turn "
        "or after a function response turn.",
    ),
    "g-response-turn-order": Case(
        "gemini",
        put(tools=G_TOOLS, contents=[G_USER, G_RESPONSE]),
        400,
        "Please ensure that function response turn comes immediately after a function call turn.",
    ),
    "g-response-count": Case(
        "gemini",
        put(
            tools=G_TOOLS,
            contents=[G_USER, {"role": "model", "parts": G_CALL["parts"] * 2}, G_RESPONSE],
        ),
        400,
        "the number of function response parts is equal to the number of function call parts",
    ),
    "g3-call-signature": Case(
        "gemini3",
        put(tools=G_TOOLS, contents=[G_USER, G_CALL, G_RESPONSE]),
        400,
        "Function call is missing a thought_signature in functionCall parts.",
    ),
}

# --- Ollama --------------------------------------------------------------------------------

O_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}

OLLAMA = {
    "o-not-json": Case("ollama", lambda b: b"{", 400, "not valid JSON"),
    "o-no-model": Case("ollama", put(model=...), 400, "model is required"),
    "o-message-without-role": Case(
        "ollama", put(messages=[{"content": "hi"}]), 400, "invalid role: 'None'"
    ),
    "o-no-tools": Case(
        "ollama",
        put(model="gemma3:1b", tools=[O_TOOL]),
        400,
        "registry.ollama.ai/library/gemma3:1b does not support tools",
    ),
    "o-no-thinking": Case(
        "ollama", put(model="llama3.2", think=True), 400, '"llama3.2" does not support thinking'
    ),
    "o-tool-definition": Case(
        "ollama",
        put(tools=[{"type": "function"}]),
        400,
        "invalid tool definition: function.name is required",
    ),
    "o-messages-type": Case(
        "ollama",
        put(messages={"a": 1}),
        400,
        "cannot unmarshal into Go struct field ChatRequest.messages of type []api.Message",
    ),
    "o-message-type": Case(
        "ollama",
        put(messages=[1]),
        400,
        "cannot unmarshal into Go struct field ChatRequest.messages of type api.Message",
    ),
    "o-role": Case(
        "ollama", put(messages=[{"role": "bot", "content": "hi"}]), 400, "invalid role: 'bot'"
    ),
    "o-content-type": Case(
        "ollama",
        put(messages=[user([{"type": "text", "text": "hi"}])]),
        400,
        "cannot unmarshal array into Go struct field Message.messages.content of type string",
    ),
    "o-call-function": Case(
        "ollama",
        put(messages=[user("hi"), {"role": "assistant", "content": "", "tool_calls": [{}]}]),
        400,
        "messages[1].tool_calls[0]: function is required",
    ),
    "o-call-arguments": Case(
        "ollama",
        put(
            messages=[
                user("hi"),
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                },
            ]
        ),
        400,
        "cannot unmarshal string into Go struct field "
        "ToolCallFunction.messages.tool_calls.function.arguments",
    ),
    "o-show-no-model": Case("ollama_show", put(model=...), 400, "model is required"),
}

# --- Bedrock -------------------------------------------------------------------------------

B_TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER}}}]}
B_USE = {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {}}}
B_RESULT = {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "sunny"}]}}


def sigv4(key: str, day: str) -> str:
    """An Authorization header in SigV4's form (its signature is not checked before its key)."""
    scope = f"{key}/{day}/us-east-1/bedrock/aws4_request"
    return (
        f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host;x-amz-date, Signature={'0' * 64}"
    )


def b_user(*blocks: Any) -> Body:
    return {"role": "user", "content": list(blocks)}


def b_assistant(*blocks: Any) -> Body:
    return {"role": "assistant", "content": list(blocks)}


BEDROCK = {
    "b-no-auth": Case(
        "converse", same, 403, "Missing Authentication Token", {"authorization": None}
    ),
    "b-incomplete-signature": Case(
        "converse",
        same,
        403,
        "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders'",
        {"authorization": "AWS4-HMAC-SHA256 nonsense"},
    ),
    "b-unknown-access-key": Case(
        "converse",
        same,
        403,
        "The security token included in the request is invalid.",
        {"authorization": sigv4("AKIDUNKNOWN", "20250101")},
    ),
    "b-expired-token": Case(
        "converse",
        same,
        403,
        "The security token included in the request is expired",
        {
            "authorization": sigv4("AKIDEXAMPLE", "20250101"),
            "x-amz-security-token": "emulator-expired-session-token",
        },
    ),
    "b-date-malformed": Case(
        "converse",
        same,
        403,
        "X-Amz-Date is missing or malformed",
        {"authorization": sigv4("AKIDEXAMPLE", "20250101")},
    ),
    "b-date-skew": Case(
        "converse",
        same,
        403,
        "Signature expired: 20200101T000000Z is now earlier or later than the allowed skew.",
        {
            "authorization": sigv4("AKIDEXAMPLE", "20200101"),
            "x-amz-date": "20200101T000000Z",
        },
    ),
    "b-not-json": Case("converse", lambda b: b"{", 400, "not valid JSON"),
    "b-extraneous-key": Case(
        "converse",
        put(foo=1),
        400,
        "Malformed input request: extraneous key [foo] is not permitted",
    ),
    "b-system-type": Case(
        "converse",
        put(system="be brief"),
        400,
        "system: must be a list of SystemContentBlock objects",
    ),
    "b-max-tokens": Case(
        "converse",
        put(inferenceConfig={"maxTokens": 0}),
        400,
        "inferenceConfig.maxTokens: must be a positive integer",
    ),
    "b-tool-name": Case(
        "converse",
        put(toolConfig={"tools": [{"toolSpec": {"name": "a b"}}]}),
        400,
        "toolConfig.tools.0.toolSpec.name: must match [a-zA-Z0-9_-]{1,64}",
    ),
    "b-tool-schema": Case(
        "converse",
        put(toolConfig={"tools": [{"toolSpec": {"name": "f"}}]}),
        400,
        "toolConfig.tools.0.toolSpec.inputSchema.json: required",
    ),
    "b-tools-empty": Case(
        "converse",
        put(toolConfig={"tools": []}),
        400,
        "toolConfig.tools: must have length greater than or equal to 1",
    ),
    "b-messages-empty": Case(
        "converse", put(messages=[]), 400, "messages: must have length greater than or equal to 1"
    ),
    "b-role": Case(
        "converse",
        put(messages=[{"role": "bot", "content": [{"text": "hi"}]}]),
        400,
        "messages.0.role: must be user or assistant",
    ),
    "b-starts-with-user": Case(
        "converse",
        put(messages=[b_assistant({"text": "hi"})]),
        400,
        "A conversation must start with a user message.",
    ),
    "b-alternates": Case(
        "converse",
        put(messages=[b_user({"text": "hi"}), b_user({"text": "again"})]),
        400,
        "A conversation must alternate between user and assistant roles.",
    ),
    "b-result-ids": Case(
        "converse",
        put(
            toolConfig=B_TOOLS,
            messages=[b_user({"text": "hi"}), b_assistant({"text": "ok"}), b_user(B_RESULT)],
        ),
        400,
        "contain toolUseIds that do not match the toolUse blocks of the previous turn.",
    ),
    "b-results-missing": Case(
        "converse",
        put(
            toolConfig=B_TOOLS,
            messages=[b_user({"text": "hi"}), b_assistant(B_USE), b_user({"text": "and?"})],
        ),
        400,
        "Expected toolResult blocks at messages.2.content for the following Ids: tooluse_1",
    ),
    "b-content-empty": Case(
        "converse",
        put(messages=[b_user()]),
        400,
        "messages.0.content: must have length greater than or equal to 1",
    ),
    "b-block-member": Case(
        "converse",
        put(messages=[b_user({"hologram": {}})]),
        400,
        "messages.0.content.0: must hold exactly one known content block member",
    ),
    "b-text-blank": Case(
        "converse",
        put(messages=[b_user({"text": " "})]),
        400,
        "The text field in the ContentBlock object at messages.0.content.0 is blank.",
    ),
    "b-tool-config-needed": Case(
        "converse",
        put(messages=[b_user({"text": "hi"}), b_assistant(B_USE), b_user(B_RESULT)]),
        400,
        "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
    ),
    "b-tool-use-id": Case(
        "converse",
        put(
            toolConfig=B_TOOLS,
            messages=[
                b_user({"text": "hi"}),
                b_assistant({"toolUse": {"toolUseId": "a b", "input": {}}}),
            ],
        ),
        400,
        "messages.1.content.0.toolUse.toolUseId: must match",
    ),
    "b-tool-use-role": Case(
        "converse",
        put(toolConfig=B_TOOLS, messages=[b_user(B_USE)]),
        400,
        "messages.0.content.0.toolUse: an assistant block with an object input",
    ),
    "b-tool-result-role": Case(
        "converse",
        put(toolConfig=B_TOOLS, messages=[b_user({"text": "hi"}), b_assistant(B_RESULT)]),
        400,
        "messages.1.content.0.toolResult: only in user messages",
    ),
    "b-tool-result-content": Case(
        "converse",
        put(
            toolConfig=B_TOOLS,
            messages=[
                b_user({"text": "hi"}),
                b_assistant(B_USE),
                b_user({"toolResult": {"toolUseId": "tooluse_1", "content": []}}),
            ],
        ),
        400,
        "messages.2.content.0.toolResult.content: must have length greater than or equal to 1",
    ),
    "b-reasoning-role": Case(
        "converse",
        put(
            messages=[
                b_user({"reasoningContent": {"reasoningText": {"text": "x", "signature": "s"}}})
            ]
        ),
        400,
        "messages.0.content.0.reasoningContent: only in assistant messages",
    ),
    "b-reasoning-signature": Case(
        "converse",
        put(
            messages=[
                b_user({"text": "hi"}),
                b_assistant(
                    {"reasoningContent": {"reasoningText": {"text": "x", "signature": "forged"}}},
                    {"text": "ok"},
                ),
                b_user({"text": "more"}),
            ]
        ),
        400,
        "messages.1.content.0.reasoningContent: the reasoning signature is invalid",
    ),
    "b-count-input": Case(
        "bedrock_count", put(input={}), 400, "input: expected exactly one of converse, invokeModel"
    ),
    "b-count-kind": Case(
        "bedrock_count", put(input={"other": {}}), 400, "input.other: not a CountTokens input"
    ),
    "b-invoke-version": Case(
        "invoke",
        put(anthropic_version="2023-06-01"),
        400,
        "anthropic_version: must be 'bedrock-2023-05-31'",
    ),
    "b-invoke-model": Case(
        "invoke", put(model="x"), 400, "#: extraneous key [model] is not permitted"
    ),
    "b-invoke-stream": Case(
        "invoke", put(stream=True), 400, "#: extraneous key [stream] is not permitted"
    ),
    "b-invoke-anthropic-rule": Case(
        "invoke", put(max_tokens=...), 400, "max_tokens: Field required"
    ),
}

# --- Vertex AI and Azure OpenAI ------------------------------------------------------------

CLOUD = {
    "v-claude-no-token": Case(
        "vertex_claude",
        same,
        401,
        "Request is missing required authentication credential.",
        {"authorization": None},
    ),
    "v-claude-api-key": Case(
        "vertex_claude",
        same,
        401,
        "Expected OAuth 2 access token",
        {"authorization": None, "x-goog-api-key": "k"},
    ),
    "v-claude-model-in-body": Case(
        "vertex_claude",
        put(model="claude-sonnet-4-5"),
        400,
        "model: Extra inputs are not permitted",
    ),
    "v-claude-version": Case(
        "vertex_claude",
        put(anthropic_version="2023-06-01"),
        400,
        "anthropic_version: Input should be 'vertex-2023-10-16'",
    ),
    "v-claude-stream": Case(
        "vertex_claude",
        put(stream=True),
        400,
        "stream: streamRawPredict takes stream: true and rawPredict does not",
    ),
    "v-claude-anthropic-rule": Case(
        "vertex_claude",
        put(max_tokens=0),
        400,
        "max_tokens: Input should be greater than or equal to 1",
    ),
    "v-gemini-no-token": Case(
        "vertex_gemini",
        same,
        401,
        "Request is missing required authentication credential.",
        {"authorization": None},
    ),
    "v-gemini-rule": Case("vertex_gemini", put(contents=[]), 400, "contents is not specified"),
    "az-no-credentials": Case(
        "azure_chat", same, 401, "Access denied due to missing subscription key.", {"api-key": None}
    ),
    "az-chat-rule": Case(
        "azure_chat", put(foo=1), 400, "Unrecognized request argument supplied: foo"
    ),
    "az-responses-no-credentials": Case(
        "azure_responses",
        same,
        401,
        "Access denied due to missing subscription key.",
        {"api-key": None},
    ),
    "az-responses-rule": Case("azure_responses", put(foo=1), 400, "Unknown parameter: 'foo'."),
}

# Rules the emulator took over from the scripted test servers it replaced.
ADDED = {
    "a-tool-result-first": Case(
        "anthropic",
        put(
            messages=[
                user("hi"),
                assistant([A_USE]),
                user([{"type": "text", "text": "here"}, A_RESULT]),
            ]
        ),
        400,
        "messages.2: `tool_result` blocks must come first in the content",
    ),
    "a-text-blank": Case(
        "anthropic",
        put(messages=[user([{"type": "text", "text": "  "}])]),
        400,
        "messages.0.content.0: text content blocks must contain non-whitespace text",
    ),
    "a-tool-use-id-pattern": Case(
        "anthropic",
        put(messages=[user("hi"), assistant([{**A_USE, "id": "toolu 1"}]), user([A_RESULT])]),
        400,
        "messages.1.content.0.tool_use.id: String should match pattern",
    ),
    "a-image-over-5mb": Case(  # one rule with the client's pre-send check (media_rules)
        "anthropic",
        put(
            messages=[
                user(
                    [
                        {"type": "text", "text": "?"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "A" * (5 * 1024 * 1024 + 4),
                            },
                        },
                    ]
                )
            ]
        ),
        400,
        "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: 5242884 bytes",
    ),
    "a-system-message-text-only": Case(
        "anthropic",
        put(messages=[{"role": "system", "content": [{"type": "image"}]}, user("hi")]),
        400,
        "messages.0.content.0.type: Input should be 'text'",
    ),
    "g-part-without-data": Case(
        "gemini",
        put(contents=[{"role": "user", "parts": [{"thought": True}]}]),
        400,
        "contents[0].parts[0].data: required oneof field 'data' must have one initialized field",
    ),
    "g-part-with-two-data": Case(
        "gemini",
        put(contents=[{"role": "user", "parts": [{"text": "hi", "inlineData": {}}]}]),
        400,
        "oneof field 'data' is already set. Cannot set 'inlineData'",
    ),
    "g-empty-text": Case(
        "gemini",
        put(contents=[{"role": "user", "parts": [{"text": ""}]}]),
        400,
        "Unable to submit request because it has an empty text parameter.",
    ),
    "g-parameter-keyword": Case(
        "gemini",
        put(
            tools=[
                {
                    "functionDeclarations": [
                        {"name": "f", "parameters": {**WEATHER, "additionalProperties": False}}
                    ]
                }
            ]
        ),
        400,
        "Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters'",
    ),
    "g3-signature-not-issued": Case(
        "gemini3",
        put(
            tools=G_TOOLS,
            contents=[
                G_USER,
                {"role": "model", "parts": [{**G_CALL["parts"][0], "thoughtSignature": "forged"}]},
                G_RESPONSE,
            ],
        ),
        400,
        "Thought signature is not valid (contents[1]).",
    ),
    "r-reasoning-alone": Case(
        "responses",
        put(
            input=[
                user("hi"),
                {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": _SEALED},
            ]
        ),
        400,
        "Item 'rs_x' of type 'reasoning' was provided without its required following item.",
    ),
    "r-user-part-type": Case(
        "responses",
        put(input=[user([{"type": "output_text", "text": "hi"}])]),
        400,
        "Invalid value: 'output_text'. Supported values are: 'input_text', 'input_image', "
        "'input_audio', and 'input_file'.",
    ),
    "r-assistant-part-type": Case(
        "responses",
        put(input=[user("hi"), assistant([{"type": "input_text", "text": "hi"}]), user("ok")]),
        400,
        "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
    ),
}

CASES = {**ANTHROPIC, **CHAT, **RESPONSES, **GEMINI, **OLLAMA, **BEDROCK, **CLOUD, **ADDED}

# With ``api_keys``: a key that is not one of them.
WRONG_KEYS = {
    "a-wrong-key": ("anthropic", {"x-api-key": "wrong"}, 401, "invalid x-api-key"),
    "c-wrong-key": (
        "chat",
        {"authorization": "Bearer wrong-key-1234"},
        401,
        "Incorrect API key provided",
    ),
    "r-wrong-key": (
        "responses",
        {"authorization": "Bearer wrong-key-1234"},
        401,
        "Incorrect API key provided",
    ),
    "g-wrong-key": (
        "gemini",
        {"x-goog-api-key": "wrong"},
        400,
        "API key not valid. Please pass a valid API key.",
    ),
    "b-wrong-bearer": (
        "converse",
        {"authorization": "Bearer wrong"},
        403,
        "Invalid API Key format",
    ),
    "v-wrong-token": (
        "vertex_claude",
        {"authorization": "Bearer wrong"},
        401,
        "Request had invalid authentication credentials.",
    ),
    "az-wrong-key": (
        "azure_chat",
        {"api-key": "wrong"},
        401,
        "Access denied due to invalid subscription key",
    ),
    "az-wrong-token": (
        "azure_chat",
        {"api-key": None, "authorization": "Bearer wrong"},
        401,
        "Unauthorized. Access token is missing, invalid",
    ),
}


def in_process(emulator: Emulator) -> httpx.Client:
    """A client handing each request to the emulator's handler, with no socket: the rules are
    the handler's (tests/testing/test_emulator.py serves them over a socket)."""
    return httpx.Client(transport=emulator.transport(), base_url="http://emulator")


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with in_process(Emulator()) as client:
        yield client


@pytest.fixture(scope="module")
def keyed() -> Iterator[httpx.Client]:
    with in_process(Emulator(api_keys=["good", "bedrock-key", "ya29.token"])) as client:
        yield client


def send(
    client: httpx.Client, base: str, change: Callable[[Body], Any], headers: dict[str, str | None]
) -> httpx.Response:
    path, base_headers, body = BASES[base]
    sent = change(copy.deepcopy(body))
    merged = {**base_headers, **headers}
    content = sent if isinstance(sent, bytes) else json.dumps(sent).encode()
    return client.post(
        path,
        content=content,
        headers={
            "content-type": "application/json",
            **{k: v for k, v in merged.items() if v is not None},
        },
    )


def message_of(response: httpx.Response) -> str:
    body = response.json()
    error = body.get("error", body) if isinstance(body, dict) else body
    return str(error if isinstance(error, str) else error.get("message"))


@pytest.mark.parametrize("base", sorted(BASES))
def test_each_base_request_is_accepted(http: httpx.Client, base: str) -> None:
    response = send(http, base, same, {})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("base", sorted({case.base for case in CASES.values()}))
def test_each_rule_refuses_what_breaks_it(http: httpx.Client, base: str) -> None:
    """Every case breaking a rule of ``base``'s request, each named where it is not refused
    with its status and fragment (one item per base request: a case costs a request)."""
    unrefused = {}
    for name, case in sorted(CASES.items()):
        if case.base != base:
            continue
        response = send(http, case.base, case.change, case.headers)
        if response.status_code != case.status or case.fragment not in message_of(response):
            unrefused[name] = (case.status, case.fragment, response.status_code, response.text)
    assert not unrefused, unrefused


@pytest.mark.parametrize("name", sorted(WRONG_KEYS))
def test_a_key_the_emulator_was_not_given_is_refused(keyed: httpx.Client, name: str) -> None:
    base, headers, status, fragment = WRONG_KEYS[name]
    response = send(keyed, base, same, {**headers})
    assert response.status_code == status, response.text
    assert fragment in message_of(response), response.text


OVERFLOW = {
    "anthropic": (400, "prompt is too long: "),
    "chat": (400, "This model's maximum context length is 10 tokens."),
    "responses": (400, "Your input exceeds the context window of this model."),
    "gemini": (400, "exceeds the maximum number of tokens allowed (10)"),
    "ollama": (400, "the input length exceeds the context length"),
    "converse": (400, "Input is too long for requested model."),
    "invoke": (400, "Input is too long for requested model."),
}


@pytest.fixture(scope="module")
def small() -> Iterator[httpx.Client]:
    windows = dict.fromkeys(["anthropic", "openai", "openai_responses", "gemini", "ollama"], 10)
    with in_process(Emulator(context_tokens={**windows, "bedrock": 10})) as client:
        yield client


@pytest.mark.parametrize("base", sorted(OVERFLOW))
def test_a_prompt_over_the_context_window_is_refused(small: httpx.Client, base: str) -> None:
    long = "word " * 40
    status, fragment = OVERFLOW[base]

    def longer(body: Body) -> Body:
        if "contents" in body:
            body["contents"][0]["parts"][0]["text"] = long
        elif base == "converse":
            body["messages"][0]["content"][0]["text"] = long
        elif "input" in body:
            body["input"] = long
        else:
            body["messages"][0]["content"] = long
        return body

    response = send(small, base, longer, {})
    assert response.status_code == status, response.text
    assert fragment in message_of(response), response.text


def test_an_unknown_path_is_a_404_and_a_wrong_method_a_405(http: httpx.Client) -> None:
    assert http.post("/v2/nothing", json={}).status_code == 404
    wrong = http.get("/v1/messages")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
