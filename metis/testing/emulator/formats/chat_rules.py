"""What OpenAI Chat Completions refuses with a 400 (message, ``param`` and ``code`` as OpenAI
sends them), in the order it checks. DeepSeek's thinking mode adds one rule.
"""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.formats import files_rules
from metis.testing.emulator.formats.cache_marks import check_prompt_cache_key
from metis.testing.emulator.formats.knobs_rules import check_openai
from metis.testing.emulator.formats.openai import (
    REASONING_MODEL,
    TEMPERATURE,
    expected,
    json_schema_format,
    missing,
    strict_schema_problem,
    supported,
)
from metis.testing.emulator.formats.openai_cache_rules import check_openai_cache
from metis.testing.emulator.rules import (
    Check,
    Refused,
    Rule,
    array,
    at_least,
    boolean,
    either,
    matches,
    names,
    never,
    nonempty,
    obj,
    string,
    text,
)

TOP_LEVEL = names(
    "model messages audio frequency_penalty function_call functions logit_bias logprobs "
    "max_completion_tokens max_tokens metadata modalities moderation n parallel_tool_calls "
    "prediction presence_penalty prompt_cache_key prompt_cache_options prompt_cache_retention "
    "reasoning_effort response_format safety_identifier seed service_tier stop store stream "
    "stream_options temperature tool_choice tools top_logprobs top_p user verbosity "
    "web_search_options"
)
OPENROUTER_FIELDS = names("reasoning provider models transforms plugins usage")
"""OpenRouter's own request fields (its API reference): taken on its path only."""
DEEPSEEK_FIELDS = names("thinking")
"""DeepSeek's own (its "Thinking Mode" guide): taken for its models."""
ROLES = ("system", "assistant", "user", "function", "tool", "developer")
PART_TYPES = ("text", "image_url", "input_audio", "refusal", "audio", "file")
FUNCTION_CALLS = "messages.*.tool_calls.*[type=function|]"
CUSTOM_CALLS = "messages.*.tool_calls.*[type=custom]"
ARGUMENTS = f"{FUNCTION_CALLS}.function.arguments"
DEEPSEEK_THINKING = re.compile(r"^deepseek-(reasoner|v4)")
"""DeepSeek's models that think (V4 unless ``thinking: {type: disabled}``)."""


def _check_top_level(body: dict[str, Any], call: Any) -> None:
    request = getattr(call, "request", None)
    own = OPENROUTER_FIELDS if str(getattr(request, "path", "")).startswith("/api/v1/") else ()
    if str(body.get("model", "")).startswith("deepseek"):
        own = DEEPSEEK_FIELDS
    for key in body:
        if key not in TOP_LEVEL and key not in own:
            raise Refused(f"Unrecognized request argument supplied: {key}")


def _check_strict_tools(body: dict[str, Any], call: Any) -> None:
    for i, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") or {}
        problem = (
            strict_schema_problem(function.get("parameters"))
            if function.get("strict") is True
            else None
        )
        if problem:
            message = f"Invalid schema for function '{function['name']}': {problem}"
            raise Refused(message, f"tools[{i}].function.parameters", "invalid_function_parameters")


def _check_tool_choice(body: dict[str, Any], call: Any) -> None:
    choice = body.get("tool_choice")
    if choice is None:
        return
    names = {
        (t.get("function") or {}).get("name")
        for t in body.get("tools") or []
        if t.get("type") == "function"
    }
    if not body.get("tools"):
        message = (
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified."
        )
        raise Refused(message, "tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        if name not in names:
            raise Refused(
                f"Invalid value for 'tool_choice': function '{name}' is not present in 'tools'.",
                "tool_choice",
            )
    elif choice not in ("none", "auto", "required") and not (
        isinstance(choice, dict) and choice.get("type") in ("allowed_tools", "custom")
    ):
        message = (
            "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named "
            "function."
        )
        raise Refused(message, "tool_choice", "invalid_value")


def _open(ids: list[str], at: int) -> Refused:
    return Refused(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(ids),
        f"messages.[{at}].role",
    )


def _check_tool_messages(body: dict[str, Any], call: Any) -> None:
    """Tool messages answer the calls of the assistant message right before them, all of them."""
    open_calls: list[str] = []
    answering: set[str] | None = None
    open_at = -1
    for i, message in enumerate(body["messages"]):
        role = message["role"]
        if open_calls and role != "tool":
            raise _open(open_calls, open_at)
        if role == "tool":
            if answering is None:
                message = (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
                raise Refused(message, f"messages.[{i}].role")
            if message["tool_call_id"] not in answering:
                text = (
                    f"Invalid parameter: 'tool_call_id' of '{message['tool_call_id']}' not found "
                    f"in 'tool_calls' of previous message."
                )
                raise Refused(text, f"messages.[{i}].tool_call_id")
            open_calls = [c for c in open_calls if c != message["tool_call_id"]]
            continue
        answering = None
        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                text = f"Invalid type for 'messages[{i}].tool_calls': expected an array of objects."
                raise Refused(text, f"messages.[{i}].tool_calls", "invalid_type")
            open_calls, open_at = [c.get("id") for c in calls], i
            answering = set(open_calls)
    if open_calls:
        raise _open(open_calls, open_at)


def _check_reasoning_sent_back(body: dict[str, Any], call: Any) -> None:
    """DeepSeek's thinking mode: every assistant message that made tool calls carries its
    ``reasoning_content`` back."""
    if not DEEPSEEK_THINKING.match(body["model"]):
        return
    for i, message in enumerate(body["messages"]):
        reasoning = message.get("reasoning_content")
        if (
            message["role"] == "assistant"
            and message.get("tool_calls")
            and not (isinstance(reasoning, str) and reasoning)
        ):
            message_text = (
                "The reasoning_content in the thinking mode must be passed back to the API."
            )
            raise Refused(message_text, f"messages[{i}].reasoning_content")


def _check_response_format(body: dict[str, Any], call: Any) -> None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        json_schema_format(fmt.get("json_schema"), "response_format.json_schema", "response_format")
    if (
        isinstance(fmt, dict)
        and fmt.get("type") == "json_object"
        and "json" not in str(body["messages"]).lower()
    ):
        message = (
            "'messages' must contain the word 'json' in some form, to use 'response_format' of "
            "type 'json_object'."
        )
        raise Refused(message, "messages")


RULES: list[Rule | Check] = [
    _check_top_level,
    Rule("model", text, "you must provide a model parameter", required=True),
    expected("stream", boolean, "a boolean, but got {type} instead", nullable=False),
    Rule(
        "stream_options",
        never,
        "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        "stream_options",
        when=lambda body: body.get("stream") is not True,
    ),
    *TEMPERATURE,
    Rule(
        "max_tokens",
        never,
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
        "'max_completion_tokens' instead.",
        "max_tokens",
        "unsupported_parameter",
        when=lambda body: bool(REASONING_MODEL.match(str(body.get("model")))),
        nullable=False,
    ),
    *(
        Rule(
            name,
            at_least(1),
            "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got "
            "{value} instead.",
            "max_tokens",
            "integer_below_min_value",
        )
        for name in ("max_completion_tokens", "max_tokens")
    ),
    expected("tools", array, "an array"),
    expected("tools.*", obj, "an object"),
    supported("tools.*.type", ("function", "custom"), required=True),
    missing("tools.*[type=function].function"),
    expected("tools.*[type=function].function", obj, "an object"),
    missing("tools.*[type=function].function.name"),
    Rule(
        "tools.*.function.name",
        matches(r"[a-zA-Z0-9_-]{1,64}"),
        "Invalid 'tools[{0}].function.name': string does not match pattern. Expected a string "
        "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
        "tools[{0}].function.name",
        "invalid_value",
    ),
    expected("tools.*.function.parameters", obj, "an object"),
    _check_strict_tools,
    _check_tool_choice,
    missing("messages"),
    expected("messages", array, "an array of objects"),
    Rule(
        "messages",
        nonempty,
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
        "empty array instead.",
        "messages",
        "empty_array",
    ),
    expected("messages.*", obj, "an object"),
    supported("messages.*.role", ROLES, required=True),
    missing("messages.*[role=user|system|developer|tool].content"),
    expected("messages.*.content.*", obj, "an object"),
    supported("messages.*.content.*.type", PART_TYPES, required=True),
    expected("messages.*.content", either(string, array), "one of a string or array of objects"),
    missing("messages.*[role=tool].tool_call_id"),
    expected("messages.*.tool_calls", array, "an array"),
    missing("messages.*.tool_calls.*.id"),
    missing(f"{FUNCTION_CALLS}.function"),
    missing(f"{FUNCTION_CALLS}.function.name"),
    missing(ARGUMENTS),
    expected(ARGUMENTS, string, "a string, but got {type} instead"),
    missing(f"{CUSTOM_CALLS}.custom"),
    missing(f"{CUSTOM_CALLS}.custom.name"),
    missing(f"{CUSTOM_CALLS}.custom.input"),
    expected(f"{CUSTOM_CALLS}.custom.input", string, "a string, but got {type} instead"),
    files_rules.openai_chat,
    _check_tool_messages,
    _check_reasoning_sent_back,
    _check_response_format,
    check_openai,
    check_openai_cache,
    check_prompt_cache_key,
]
