"""What OpenAI Chat Completions refuses with a 400: its table (``tables/chat.yaml``) and the
checks it names. DeepSeek's thinking mode adds rows and one check.
"""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.formats.cache_marks import check_prompt_cache_key
from metis.testing.emulator.formats.knobs_rules import check_openai
from metis.testing.emulator.formats.openai import json_schema_format, strict_schema_problem
from metis.testing.emulator.formats.openai_cache_rules import check_openai_cache
from metis.testing.emulator.rules import LOADED, Refused, table

DEEPSEEK_THINKING = re.compile(r"^deepseek-(reasoner|v4)")
"""DeepSeek's models that think (V4 unless ``thinking: {type: disabled}``)."""


def _check_top_level(body: dict[str, Any], call: Any) -> None:
    """The fields Chat takes (the ``names`` of ``tables/chat.yaml``), OpenRouter's own on its
    path and DeepSeek's for its models."""
    path = str(getattr(getattr(call, "request", None), "path", ""))
    own = "openrouter" if path.startswith("/api/v1/") else None
    own = "deepseek" if str(body.get("model", "")).startswith("deepseek") else own
    chat = LOADED["chat"]
    taken = {*chat.choices("top level"), *(chat.choices(own) if own else ())}
    for key in body:
        if key not in taken:
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


def _check_chosen_function(body: dict[str, Any], call: Any) -> None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        tools = [t for t in body["tools"] if t.get("type") == "function"]
        name = (choice.get("function") or {}).get("name")
        if name not in {(t.get("function") or {}).get("name") for t in tools}:
            raise Refused(
                f"Invalid value for 'tool_choice': function '{name}' is not present in 'tools'.",
                "tool_choice",
            )


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


RULES = table(
    "chat",
    {
        "top level": _check_top_level,
        "strict tools": _check_strict_tools,
        "chosen function": _check_chosen_function,
        "tool messages": _check_tool_messages,
        "response format": _check_response_format,
        "model settings": check_openai,
        "prompt cache": check_openai_cache,
        "prompt_cache_key": check_prompt_cache_key,
    },
)
