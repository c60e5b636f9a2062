"""What the OpenAI Responses API refuses of a request's input items, checked on the encoded
request before it is sent (``pre_send_check``, metis/wire/rules.py). The calls, their outputs
and the reasoning items, and a chosen function, are rules the emulator reads too
(:func:`tool_items` and :func:`chosen_function`, the "items" and "chosen function" checks of its
``tables/responses.yaml``), in OpenAI's words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from metis.wire.json_limits import loads
from metis.wire.media_rules import openai_responses_media_problems
from metis.wire.refusal import Refusal

RESPONSES_ITEMS = frozenset(
    [
        "web_search_call",
        "code_interpreter_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "compaction",
        "item_reference",
    ]
)
"""The input items besides messages, calls, outputs and reasoning that the Responses API takes
back (openai-python ``responses/response_input_item_param.py``): a reply's server tool items
and the other items metis keeps whole go back as they came (docs/contract.md §8, §11)."""
_LED_TO = frozenset({"message", "function_call", "custom_tool_call"}) | RESPONSES_ITEMS
_KNOWN = _LED_TO | {"function_call_output", "custom_tool_call_output", "reasoning"}
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def tool_items(
    items: list[Any],
    continued: bool = False,
    reasoning: Callable[[dict[str, Any]], Iterable[Refusal]] | None = None,
) -> Iterator[Refusal]:
    """Each tool output answers a call made before it (or, ``continued``, in the stored
    response it follows), every call is answered, and each reasoning item comes before the item
    it led to; ``reasoning`` (the emulator's) tells what else a reasoning item must be."""
    calls: dict[Any, None] = {}  # in order; a set's lookup (a list's made this quadratic)
    answered: set[Any] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message" and i > 0 and _named_after_unnamed(items[i - 1], item):
            yield Refusal(
                f"Item '{item['id']}' of type 'message' was provided without its required "
                "'reasoning' item.",
                "input",
            )
        elif kind in _CALLS:
            calls[item.get("call_id")] = None
        elif kind in _OUTPUTS:
            call_id = item.get("call_id")
            if call_id not in calls and not continued:
                yield Refusal(
                    f"No tool call found for function call output with call_id {call_id}.",
                    "input",
                )
            answered.add(call_id)
        elif kind == "reasoning":
            yield from reasoning(item) if reasoning is not None else ()
            following = items[i + 1] if i + 1 < len(items) else None
            led_to = following.get("type", "message") if isinstance(following, dict) else None
            if not (isinstance(led_to, str) and led_to in _LED_TO) or _unnamed_answer(
                item, following
            ):
                yield Refusal(
                    f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item.",
                    "input",
                )
    for call_id in calls:
        if call_id not in answered:
            yield Refusal(f"No tool output found for function call {call_id}.", "input")


def _unnamed_answer(reasoning: dict[str, Any], following: Any) -> bool:
    """Whether a reasoning item named by its ``id`` is followed by an assistant message with
    none: OpenAI finds no item it led to and refuses it as one without its following item
    (mastra-ai/mastra#11103: the same input with the message's ``id`` is taken)."""
    return (
        isinstance(reasoning.get("id"), str)
        and isinstance(following, dict)
        and following.get("type", "message") == "message"
        and following.get("role") == "assistant"
        and following.get("id") is None
    )


def _named_after_unnamed(reasoning: Any, message: dict[str, Any]) -> bool:
    """Whether an assistant message named by its ``id`` follows a reasoning item with none:
    OpenAI ties the message to the reasoning item's id and refuses it without that id
    (NousResearch/hermes-agent#97442, where OpenAI's message also names the reasoning item's
    id, which the request no longer carries)."""
    return (
        isinstance(reasoning, dict)
        and reasoning.get("type") == "reasoning"
        and reasoning.get("id") is None
        and message.get("role") == "assistant"
        and isinstance(message.get("id"), str)
    )


def chosen_function(body: dict[str, Any]) -> Iterator[Refusal]:
    """A ``tool_choice`` of a function names one of the request's functions."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return
    tools = body.get("tools")
    names = {
        t.get("name")
        for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, dict) and t.get("type") == "function"
    }
    if choice.get("name") not in names:
        yield Refusal(
            f"Tool choice '{choice.get('name')}' not found in 'tools' parameter.", "tool_choice"
        )


def item_problems(body: dict[str, Any], items: list[Any]) -> list[str]:
    """The problems of a Responses body's input ``items`` (a list with an item)."""
    problems: list[str] = []
    for i, item in enumerate(items):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        where = f"input[{i}]"
        if kind == "function_call":
            if not is_json_object(item.get("arguments")):
                problems.append(f"{where}.arguments: must be a JSON object string")
        elif kind == "custom_tool_call":  # a freeform call: its input is any text
            if not isinstance(item.get("input"), str):
                problems.append(f"{where}.input: must be a string")
        elif kind == "compaction":  # a compaction the provider made, back as it came
            if not isinstance(item.get("encrypted_content"), str):
                problems.append(f"{where}.encrypted_content: must be a string")
        elif kind == "message":
            _message_problems(item, where, problems)
        elif not (isinstance(kind, str) and kind in _KNOWN):
            problems.append(f"{where}: unknown item type {kind!r}")
    continued = body.get("previous_response_id") is not None  # earlier calls live server-side
    problems += [refusal.problem() for refusal in tool_items(items, continued)]
    problems += openai_responses_media_problems(items)
    problems += [refusal.problem() for refusal in chosen_function(body)]
    return problems


def is_json_object(text: Any) -> bool:
    """Whether ``text`` parses as a JSON object (anything else, a non-string too: no)."""
    try:
        return isinstance(loads(text), dict)
    except (TypeError, ValueError):
        return False


def _message_problems(item: dict[str, Any], where: str, problems: list[str]) -> None:
    assistant = item.get("role") == "assistant"
    content = item.get("content")
    for j, part in enumerate(content if isinstance(content, list) else []):
        kind_of = str(part.get("type", ""))
        ok = kind_of in ("output_text", "refusal") if assistant else kind_of.startswith("input_")
        if not ok:
            problems.append(f"{where}.content[{j}]: {item.get('role')} content cannot be {kind_of}")
