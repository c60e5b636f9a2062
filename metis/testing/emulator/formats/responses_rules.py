"""What the OpenAI Responses API refuses with a 400: its table (``tables/responses.yaml``) and
the checks it names. A request that continues a stored response (``previous_response_id``) is
checked with the stored items in front of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from metis.testing.emulator.formats import compaction
from metis.testing.emulator.formats.cache_marks import check_prompt_cache_key
from metis.testing.emulator.formats.knobs_rules import check_openai
from metis.testing.emulator.formats.openai import json_schema_format, strict_schema_problem
from metis.testing.emulator.formats.openai_cache_rules import check_openai_cache
from metis.testing.emulator.rules import Check, Refused, first, table
from metis.testing.emulator.wire import encrypted_content, opens_encrypted_content
from metis.wire.reasoning_rules import responses_effort
from metis.wire.refusal import Refusal
from metis.wire.responses_rules import chosen_function, tool_items

SIGNATURE_KIND = "openai-reasoning"


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


def _check_items(body: dict[str, Any], call: Any) -> None:
    """The library's rule over the conversation (metis/wire/responses_rules.py), with what a
    reasoning item must be here: carrying what this emulator issued, or stored by it."""
    continued = body.get("previous_response_id") is not None
    strict = call.env.strict_signatures

    def reasoning(item: dict[str, Any]) -> Iterator[Refusal]:
        content = item.get("encrypted_content")
        if (
            isinstance(content, str)
            and strict
            and not opens_encrypted_content(SIGNATURE_KIND, content)
        ):
            message = f"The encrypted content for item {item.get('id')} could not be verified."
            yield Refusal(message, None, "invalid_encrypted_content")
        elif (
            not isinstance(content, str)
            and not continued
            and strict
            and not _stored(call.env, item["id"])
        ):
            yield Refusal(
                f"Item with id '{item['id']}' not found. Items are not persisted when `store` is "
                "set to false. Try again with `store` set to true, or remove this item from your "
                "input.",
                "input",
            )

    items = items_of(body, call)
    for refusal in tool_items(items, reasoning=reasoning):
        raise Refused(*refusal)
    if strict:
        _check_server_items(items, body, call.env)


SERVER_ITEMS = ("web_search_call", "code_interpreter_call")


def _check_server_items(items: list[Any], body: dict[str, Any], env: Any) -> None:
    """A hosted tool's call item sent back must be one this emulator made and stored, as
    OpenAI looks an item's id up among those it stored (an id it never made, or one of a
    response kept with ``store: false``, is not found)."""
    for item in items:
        if not isinstance(item, dict) or item.get("type") not in SERVER_ITEMS:
            continue
        if not _stored(env, str(item.get("id"))):
            said = f"Item with id '{item.get('id')}' not found."
            if body.get("store") is False:
                said += (
                    " Items are not persisted when `store` is set to false. Try again with "
                    "`store` set to true, or remove this item from your input."
                )
            raise Refused(said, "input")


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


CHECKS: dict[str, Check] = {
    "previous response": _check_previous,
    "strict tools": _check_strict_tools,
    "chosen function": first(chosen_function),
    "items": _check_items,
    "text format": _check_text_format,
    "compaction seal": compaction.check_responses_seal,
    "reasoning model": first(responses_effort),
    "model settings": check_openai,
    "prompt cache": check_openai_cache,
    "prompt_cache_key": check_prompt_cache_key,
}
RULES = table("responses", CHECKS)
COUNT_RULES = table("responses", CHECKS, {"top level": "input tokens"})
"""``/v1/responses/input_tokens``: the same rules over the fields it takes."""
COMPACT_RULES = table("responses", CHECKS, {"top level": "compact"})
"""``/v1/responses/compact``: the same rules over the fields it takes."""
