"""What the OpenAI Responses API refuses with a 400, in the order it checks. A request that
continues a stored response (``previous_response_id``) is checked with the stored items in
front of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metis.testing.emulator.formats import compaction, files_rules
from metis.testing.emulator.formats.cache_marks import check_prompt_cache_key
from metis.testing.emulator.formats.knobs_rules import check_openai
from metis.testing.emulator.formats.openai import (
    TEMPERATURE,
    expected,
    json_schema_format,
    listing,
    missing,
    strict_schema_problem,
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
    names,
    obj,
    one_of,
    string,
    text,
    typed,
)
from metis.testing.emulator.wire import encrypted_content, opens_encrypted_content

TOP_LEVEL = names(
    "model input instructions tools tool_choice parallel_tool_calls max_output_tokens "
    "max_tool_calls temperature top_p top_logprobs stream stream_options store metadata reasoning "
    "text include previous_response_id truncation user safety_identifier prompt_cache_key "
    "prompt_cache_options prompt_cache_retention service_tier background background_options "
    "prompt conversation context_management moderation access_programs image client_metadata"
)
INPUT_TOKENS_FIELDS = names(
    "model input instructions tools tool_choice parallel_tool_calls previous_response_id "
    "conversation reasoning text truncation personality"
)
SIGNATURE_KIND = "openai-reasoning"
USER_PARTS = ("input_text", "input_image", "input_audio", "input_file")
ASSISTANT_PARTS = ("output_text", "refusal")


def encrypt(summary: str) -> str:
    """A reasoning summary as an ``encrypted_content`` only this emulator opens."""
    return encrypted_content(SIGNATURE_KIND, summary)


def items_of(body: dict[str, Any], call: Any) -> list[Any]:
    """The conversation a request stands for: the stored items of the response it continues,
    then its own input."""
    items: list[Any] = []
    previous = body.get("previous_response_id")
    if previous is not None:
        connection = call.request.connection  # a WebSocket connection's last response first
        with call.env.lock:
            stored = (connection or {}).get(previous) or call.env.responses.get(previous)
        if stored is None:
            raise Refused(
                f"Previous response with id '{previous}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        items += stored
    raw = body.get("input")
    return items + ([{"role": "user", "content": raw}] if isinstance(raw, str) else raw or [])


def _check_strict_tools(body: dict[str, Any], call: Any) -> None:
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            text = f"Invalid type for 'tools[{i}]': expected an object."
            raise Refused(text, f"tools[{i}]", "invalid_type")
        problem = (
            strict_schema_problem(tool.get("parameters")) if tool.get("strict") is True else None
        )
        if tool["type"] == "function" and problem:
            raise Refused(
                f"Invalid schema for function '{tool['name']}': {problem}",
                f"tools[{i}].parameters",
                "invalid_function_parameters",
            )


def _check_tool_choice(body: dict[str, Any], call: Any) -> None:
    choice = body.get("tool_choice")
    names = {t.get("name") for t in body.get("tools") or [] if t["type"] == "function"}
    if (
        isinstance(choice, dict)
        and choice.get("type") == "function"
        and choice.get("name") not in names
    ):
        raise Refused(
            f"Tool choice '{choice.get('name')}' not found in 'tools' parameter.", "tool_choice"
        )
    if (
        choice is not None
        and not isinstance(choice, dict)
        and choice not in ("none", "auto", "required")
    ):
        raise Refused("Invalid value for 'tool_choice'.", "tool_choice", "invalid_value")


CALL_KINDS = {
    "custom_tool_call": "function_call",
    "custom_tool_call_output": "function_call_output",
}
"""A custom (freeform) tool's call and output pair as a function's do."""


def _check_items(body: dict[str, Any], call: Any) -> None:
    """Outputs answer earlier calls and every call is answered; reasoning items carry what this
    emulator issued (or were stored by it) and come before the item they led to."""
    items = items_of(body, call)
    continued = body.get("previous_response_id") is not None
    strict = call.env.strict_signatures
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = CALL_KINDS.get(item.get("type", "message"), item.get("type", "message"))
        if kind == "function_call":
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                raise Refused(
                    f"No tool call found for function call output with call_id {item['call_id']}.",
                    "input",
                )
            answered.add(item["call_id"])
        elif kind == "reasoning":
            _check_reasoning(item, items[i + 1 : i + 2], strict, continued, call)
    missing = [c for c in calls if c not in answered]
    if missing:
        raise Refused(f"No tool output found for function call {missing[0]}.", "input")


def _check_reasoning(
    item: dict[str, Any], following: list[Any], strict: bool, continued: bool, call: Any
) -> None:
    content = item.get("encrypted_content")
    if isinstance(content, str) and strict and not opens_encrypted_content(SIGNATURE_KIND, content):
        message = f"The encrypted content for item {item['id']} could not be verified."
        raise Refused(message, None, "invalid_encrypted_content")
    if (
        not isinstance(content, str)
        and not continued
        and strict
        and not _stored(call.env, item["id"])
    ):
        raise Refused(
            f"Item with id '{item['id']}' not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or remove this item from your input.",
            "input",
        )
    led_to = following[0].get("type", "message") if following else None
    if CALL_KINDS.get(str(led_to), led_to) not in ("message", "function_call", *SERVER_ITEMS):
        raise Refused(
            f"Item '{item['id']}' of type 'reasoning' was provided without its required following "
            f"item.",
            "input",
        )


def _stored(env: Any, item_id: str) -> bool:
    with env.lock:
        stored = list(env.responses.values())
    return any(item.get("id") == item_id for items in stored for item in items)


def _check_text_format(body: dict[str, Any], call: Any) -> None:
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        json_schema_format(fmt, "text.format", "text.format.schema")


def _check_previous(body: dict[str, Any], call: Any) -> None:
    items_of({**body, "input": None}, call)


def _check_messages(body: dict[str, Any], call: Any) -> None:
    """Message items: a known role, and content parts of their role's kinds."""
    raw = body.get("input")
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        role = item.get("role")
        if item.get("type", "message") != "message":
            continue
        if role not in ("user", "assistant", "system", "developer"):
            message = (
                f"Invalid value: '{role}'. Supported values are: 'assistant', 'system', "
                f"'developer', and 'user'."
            )
            raise Refused(message, f"input[{i}].role", "invalid_value")
        allowed = ASSISTANT_PARTS if role == "assistant" else USER_PARTS
        for j, part in enumerate(
            item.get("content") if isinstance(item.get("content"), list) else []
        ):
            if not typed("type", one_of(*allowed))(part):
                names = listing(allowed)
                message = (
                    f"Invalid value: '{part.get('type') if isinstance(part, dict) else part}'. "
                    f"Supported values are: {names}."
                )
                raise Refused(message, f"input[{i}].content[{j}]", "invalid_value")


def _starts_anew(body: dict[str, Any]) -> bool:
    return body.get("previous_response_id") is None and body.get("prompt") is None


SERVER_ITEMS = ("web_search_call", "code_interpreter_call")
"""The built-in tools' items, which go back whole (openai-python ``ResponseInputItemParam``)."""
SERVER_FIELDS = {
    "web_search_call": ("id", "status", "action"),
    "code_interpreter_call": ("id", "status", "code", "container_id", "outputs"),
}
FUNCTION_CALLS = "input.*[type=function_call]"
CUSTOM_CALLS = "input.*[type=custom_tool_call]"


def taking(fields: Iterable[str]) -> Rule:
    """OpenAI's refusal of a top-level field the endpoint does not take."""
    return Rule(
        "~", one_of(*fields), "Unknown parameter: '{value}'.", "{value}", "unknown_parameter"
    )


RULES: list[Rule | Check] = [
    taking(TOP_LEVEL),
    missing("model", test=text),
    *TEMPERATURE,
    Rule(
        "max_output_tokens",
        at_least(16),
        "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but "
        "got {value} instead.",
        "max_output_tokens",
        "integer_below_min_value",
    ),
    expected("stream", boolean, "a boolean", nullable=False),
    _check_previous,
    missing("input", when=_starts_anew),
    expected("input", either(string, array), "one of a string or array of input items"),
    expected("tools", array, "an array"),
    missing("tools.*.type"),
    missing("tools.*[type=function].name"),
    expected("tools.*.parameters", obj, "an object"),
    _check_strict_tools,
    _check_tool_choice,
    expected("input.*", obj, "an object"),
    missing("input.*[type=message|].content"),
    _check_messages,
    missing(f"{FUNCTION_CALLS}.call_id"),
    missing(f"{FUNCTION_CALLS}.name"),
    expected(f"{FUNCTION_CALLS}.arguments", string, "a string"),
    missing("input.*[type=function_call_output].call_id"),
    missing(f"{CUSTOM_CALLS}.call_id"),
    missing(f"{CUSTOM_CALLS}.name"),
    expected(f"{CUSTOM_CALLS}.input", string, "a string"),
    missing("input.*[type=custom_tool_call_output].call_id"),
    *(
        missing(f"input.*[type={kind}].{field}", nullable=field not in ("code", "outputs"))
        for kind, fields in SERVER_FIELDS.items()
        for field in fields
    ),
    files_rules.openai_responses,
    missing("input.*[type=reasoning].id"),
    _check_items,
    _check_text_format,
    compaction.check_responses,
    check_openai,
    check_openai_cache,
    check_prompt_cache_key,
]
