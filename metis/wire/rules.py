"""What each provider refuses with a 400, checked on the encoded request before it is sent.

Each rule set reads a provider's JSON body and returns every problem it finds, as
``"<where>: <what>"`` strings, so the ``pre_send_check`` stage can report them all at once
instead of one provider 400 after a network round trip. The rules are the providers'
documented (and observed) validation: tool_use / tool_result pairing and order, id and name
formats, role alternation, signatures on thinking blocks, empty text, and (Anthropic) what
thinking allows of tool choice, sampling and an open tool loop (``anthropic_rules``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from metis.wire.chat_rules import chosen_function, tool_messages
from metis.wire.media_rules import (
    anthropic_media,
    gemini_media,
    openai_chat_media_problems,
)
from metis.wire.reasoning_rules import chat_effort, responses_effort
from metis.wire.refusal import Refusal
from metis.wire.responses_rules import is_json_object, item_problems

Rules = Callable[[dict[str, Any]], list[str]]

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_GEMINI_TOOL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    previous = None  # the first message may be the assistant's: Anthropic takes it
    for i, message in enumerate(messages):
        role = _role(message)
        same, previous = i and role == previous, role
        if role not in ("user", "assistant"):
            problems.append(f"messages.{i}: role must be user or assistant, not {role!r}")
            continue
        if same:
            problems.append(f"messages.{i}: roles must alternate between user and assistant")
        blocks = _anthropic_blocks(message)
        if not blocks:
            problems.append(f"messages.{i}: content must not be empty")
        _anthropic_block_problems(blocks, i, problems, role == "assistant")
    from metis.wire.anthropic.rules import parameter_problems  # Anthropic's only
    from metis.wire.anthropic.tool_pairs import tool_pairs

    problems += [refusal.message for refusal in tool_pairs(messages)]
    problems += _tool_names(body.get("tools"), lambda t: t.get("name"))
    problems += parameter_problems(body)
    problems += [refusal.message for refusal in anthropic_media(body)]
    return problems


def _anthropic_block_problems(
    blocks: list[dict[str, Any]], i: int, problems: list[str], assistant: bool
) -> None:
    """Each block's own problems, added to ``problems`` (a blank text is refused but in an
    assistant's turn, as Claude may have written it)."""
    for j, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text" and not assistant and not str(block.get("text", "")).strip():
            problems.append(
                f"{_block_at(i, j)}: text content blocks must contain non-whitespace text"
            )
        elif kind == "thinking" and not block.get("signature"):
            problems.append(f"{_block_at(i, j)}: thinking blocks must carry their signature")
        elif kind == "tool_use":
            tool_id = block.get("id")
            if not _ANTHROPIC_ID.match(str(tool_id or "")):
                problems.append(
                    f"{_block_at(i, j)}: tool_use id {tool_id!r} has characters Anthropic refuses"
                )
            if not isinstance(block.get("input"), dict):
                problems.append(f"{_block_at(i, j)}: tool_use input must be an object")


def _block_at(i: int, j: int) -> str:
    """Where a block is, as Anthropic names it (built only for a block with a problem)."""
    return f"messages.{i}.content.{j}"


def openai_chat_problems(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    for i, message in enumerate(messages):
        role = _role(message)
        if role == "assistant":
            for j, call in enumerate(message.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                if len(str(call.get("id", ""))) > 40:
                    problems.append(f"messages[{i}].tool_calls[{j}].id: longer than 40 characters")
                if call.get("type") == "custom":  # a freeform call: its input is any text
                    if not isinstance((call.get("custom") or {}).get("input"), str):
                        problems.append(
                            f"messages[{i}].tool_calls[{j}].custom.input: must be a string"
                        )
                elif not is_json_object(call.get("function", {}).get("arguments")):
                    problems.append(
                        f"messages[{i}].tool_calls[{j}].function.arguments: must be a JSON "
                        "object string"
                    )
        elif role in ("system", "developer", "user"):
            if message.get("content") in (None, "", []):
                problems.append(f"messages[{i}]: {role} content must not be empty")
        elif role != "tool":
            problems.append(f"messages[{i}]: unknown role {role!r}")
    problems += [refusal.problem() for refusal in tool_messages(messages)]
    problems += [refusal.problem() for refusal in chosen_function(body)]
    problems += _tool_names(body.get("tools"), _chat_tool_name)
    problems += openai_chat_media_problems(body)
    problems += [refusal.problem() for refusal in chat_effort(body)]
    return problems


def _chat_tool_name(tool: dict[str, Any]) -> Any:
    spec = tool.get("custom" if tool.get("type") == "custom" else "function")
    return spec.get("name") if isinstance(spec, dict) else None


def deepseek_problems(body: dict[str, Any]) -> list[str]:
    """Chat Completions' rules, and thinking mode's: every assistant message that made tool
    calls carries its (non-empty) ``reasoning_content``."""
    problems = openai_chat_problems(body)
    thinking = body.get("thinking")
    thinks = (
        str(body.get("model", "")).startswith("deepseek-reasoner")
        or "reasoning_effort" in body
        or (isinstance(thinking, dict) and thinking.get("type") == "enabled")
    )
    messages = body.get("messages")
    for i, message in enumerate(messages if thinks and isinstance(messages, list) else []):
        if _role(message) == "assistant" and message.get("tool_calls"):
            reasoning = message.get("reasoning_content")
            if not (isinstance(reasoning, str) and reasoning):
                problems.append(
                    f"messages[{i}].reasoning_content: thinking mode needs it back on every "
                    "assistant message that made tool calls"
                )
    return problems


def openai_responses_problems(body: dict[str, Any]) -> list[str]:
    items = body.get("input")
    if not isinstance(items, list) or not items:
        return ["input: at least one item is required"]
    problems = item_problems(body, items)
    problems += [refusal.problem() for refusal in responses_effort(body)]
    return problems + _tool_names(body.get("tools"), lambda t: t.get("name"))


GEMINI_DATA: tuple[str, ...] = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
)
"""The fields of a Gemini part's ``data``, of which it sets one (or none, with a
``thoughtSignature``)."""


def gemini_part_data(contents: list[Any]) -> Iterator[Refusal]:
    """Each part sets one data field (none with a thought signature), and no text is empty."""
    for i, content in enumerate(contents):
        parts = content.get("parts") if isinstance(content, dict) else None
        for j, part in enumerate(parts if isinstance(parts, list) else ()):
            if not isinstance(part, dict):
                continue
            kinds = [kind for kind in GEMINI_DATA if kind in part]
            if len(kinds) == 1 and part.get("text") != "":
                continue
            where = f"* GenerateContentRequest.contents[{i}].parts[{j}].data"
            signed = "thoughtSignature" in part
            if not kinds and not signed:
                yield Refusal(
                    f"{where}: required oneof field 'data' must have one initialized field\n"
                )
            if len(kinds) > 1:
                yield Refusal(
                    f"{where}: oneof field 'data' is already set. Cannot set '{kinds[1]}'\n"
                )
            if part.get("text") == "" and not signed:
                yield Refusal(
                    "Unable to submit request because it has an empty text parameter. Add a "
                    "value to the parameter and try again."
                )


def gemini_problems(body: dict[str, Any]) -> list[str]:
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return ["contents: at least one content is required"]
    problems: list[str] = []
    pending: list[str] | None = None  # function calls of the previous model turn
    for i, content in enumerate(contents):
        role, parts = content.get("role"), content.get("parts")
        if role not in ("user", "model"):
            problems.append(f"contents[{i}]: role must be user or model, not {role!r}")
        if not isinstance(parts, list) or not parts:
            problems.append(f"contents[{i}]: parts must not be empty")
            continue
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        names = sorted(str(r.get("name")) for r in responses)
        if pending is not None and (role != "user" or names != sorted(pending)):
            problems.append(
                f"contents[{i}]: function responses must answer the previous turn's function "
                f"calls ({sorted(pending)} vs {names})"
            )
        elif pending is None and responses:
            problems.append(f"contents[{i}]: functionResponse without a preceding functionCall")
        calls = [str(p["functionCall"].get("name")) for p in parts if "functionCall" in p]
        pending = calls if role == "model" and calls else None
    problems += [refusal.problem() for refusal in gemini_part_data(contents)]
    problems += [refusal.problem() for refusal in gemini_turns(contents)]
    tools = body.get("tools")
    declarations = [
        d
        for t in (tools if isinstance(tools, list) else [])
        for d in (t.get("functionDeclarations") or [])
    ]
    problems += _tool_names(declarations, lambda d: d.get("name"), _GEMINI_TOOL_NAME)
    problems += [refusal.problem() for refusal in gemini_media(body)]
    return problems


def gemini_turns(contents: list[Any]) -> Iterator[Refusal]:
    """Function calls follow a user turn or function responses; responses answer the turn
    before, one response per call."""
    previous, calls = "", 0
    for content in contents:
        content = content if isinstance(content, dict) else {}
        parts = content.get("parts")
        parts = [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        kind = turn_kind(content.get("role"), parts)
        if kind == "calls" and previous not in ("user", "responses"):
            yield Refusal(
                "Please ensure that function call turn comes immediately after a user turn or "
                "after a function response turn."
            )
        if kind == "responses" and previous != "calls":
            yield Refusal(
                "Please ensure that function response turn comes immediately after a function "
                "call turn."
            )
        if kind == "responses" and sum("functionResponse" in p for p in parts) != calls:
            yield Refusal(
                "Please ensure that the number of function response parts is equal to the number "
                "of function call parts of the function call turn."
            )
        previous, calls = kind, sum("functionCall" in p for p in parts)


def turn_kind(role: Any, parts: list[dict[str, Any]]) -> str:
    """A Gemini turn as its tool rules see it: ``calls``, ``responses``, ``model`` or
    ``user``."""
    if any("functionCall" in p for p in parts):
        return "calls"
    if any("functionResponse" in p for p in parts):
        return "responses"
    return "model" if role == "model" else "user"


def ollama_problems(body: dict[str, Any]) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    called: list[str] = []
    for i, message in enumerate(messages):
        role = _role(message)
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"messages[{i}]: unknown role {role!r}")
        for j, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            if not isinstance(function.get("arguments"), dict):
                problems.append(f"messages[{i}].tool_calls[{j}]: arguments must be an object")
            called.append(str(function.get("name")))
        if role == "tool" and message.get("tool_name") not in called:
            name = message.get("tool_name")
            problems.append(f"messages[{i}]: tool result for {name!r}, which was never called")
    return problems


RULES_DIALECT = {"deepseek": "openai_chat"}
"""Rules written for one provider of a shared wire dialect: the dialect they check."""


def converse_problems(body: dict[str, Any]) -> list[str]:
    """Bedrock Converse's rules, its codec package loaded only by a stack that uses it."""
    from metis.wire.bedrock_converse.rules import converse_problems as problems

    return problems(body)


RULES: dict[str, Rules] = {
    "anthropic": anthropic_problems,
    "bedrock_anthropic": anthropic_problems,
    "bedrock_converse": converse_problems,
    "openai_chat": openai_chat_problems,
    "deepseek": deepseek_problems,
    "openai_responses": openai_responses_problems,
    "gemini": gemini_problems,
    "ollama": ollama_problems,
}


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _anthropic_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _tool_names(
    tools: Any, name_of: Callable[[dict[str, Any]], Any], rule: re.Pattern[str] = _TOOL_NAME
) -> list[str]:
    problems = []
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        name = name_of(tool) if isinstance(tool, dict) else None
        if name is not None and not rule.match(str(name)):
            problems.append(f"tools.{i}.name: {name!r} must match {rule.pattern}")
    return problems
