"""What Bedrock's Converse API refuses with a ValidationException, checked before sending.

The same rules the Converse API reference and its error messages state: the conversation
starts with a user message and alternates roles, no message is empty, no text block is blank,
tool ids and names match ``[a-zA-Z0-9_-]{1,64}``, tool blocks need a ``toolConfig``, and every
``toolUse`` is answered by a ``toolResult`` in the next message and only there (a server
tool's, ``type: "server_tool_use"``, in the assistant message that holds it), files keep the
limits of metis/wire/bedrock_converse/media.py, and a structured output schema closes every
object. The conversation's order (``turns``) is said in Converse's words, and the emulator
refuses by it too (metis/wire/refusal.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from metis.wire.bedrock_converse.media import message_files
from metis.wire.closed_schema import closed_schema_or_reason
from metis.wire.refusal import Refusal

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


START = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation "
    "alternates between user and assistant roles and try again."
)
NEEDS_CONFIG = (
    "The toolConfig field must be defined when using toolUse and toolResult content blocks."
)
NEEDS_CONFIG_FIX = (
    " (metis: the conversation holds tool calls; give the request the tools they called, "
    "tools=[...], as the call that made them had)"
)
SERVER_CALL = "server_tool_use"


def converse_problems(body: dict[str, Any]) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems = [
        refusal.message + (NEEDS_CONFIG_FIX if refusal.message == NEEDS_CONFIG else "")
        for refusal in turns(body, unanswered_at_end=True)
    ]
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        blocks = message.get("content") if isinstance(message, dict) else None
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"messages.{i}: content must not be empty")
            continue
        problems += _block_problems(i, blocks)
        files = message_files(i, role, [b for b in blocks if isinstance(b, dict)])
        problems += [refusal.message for refusal in files]
    for j, tool in enumerate((body.get("toolConfig") or {}).get("tools") or []):
        if "toolSpec" not in tool:
            continue  # a cache checkpoint, or a system tool (Nova's) named by AWS
        name = (tool.get("toolSpec") or {}).get("name")
        if not _NAME.match(str(name or "")):
            problems.append(f"toolConfig.tools.{j}: tool name {name!r} must match [a-zA-Z0-9_-]")
    return problems + _output_format_problems(body)


def turns(body: dict[str, Any], unanswered_at_end: bool = False) -> Iterator[Refusal]:
    """The conversation's order, in Converse's words: it starts with a user message and
    alternates, tool blocks need a ``toolConfig``, and each message's ``toolResult`` blocks
    answer exactly the ``toolUse`` blocks of the message before (a server tool's call, Nova's,
    is answered in its own message by a result with a ``type``). ``unanswered_at_end``: calls
    the last message leaves open are a refusal too (in metis's words: Converse's are not
    known)."""
    has_tools = bool((body.get("toolConfig") or {}).get("tools"))
    previous, open_calls, told = None, _NONE, False
    messages = body.get("messages") or []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if i == 0 and role != "user":
            yield Refusal(START)
        elif i and role == previous:
            yield Refusal(ALTERNATE)
        previous = role
        calls, answered, tool_blocks = _tool_ids(message)
        if tool_blocks and not has_tools and not told:
            told = True
            yield Refusal(NEEDS_CONFIG)
        if answered != open_calls:
            if answered - open_calls:
                yield Refusal(
                    f"messages.{i}: The toolResult blocks at messages.{i}.content contain "
                    "toolUseIds that do not match the toolUse blocks of the previous turn."
                )
            if open_calls - answered:
                yield Refusal(
                    f"messages.{i}: Expected toolResult blocks at messages.{i}.content for the "
                    f"following Ids: {', '.join(sorted(open_calls - answered))}"
                )
        open_calls = calls
    if unanswered_at_end and open_calls:
        yield Refusal(
            f"messages.{len(messages) - 1}: toolUse ids {sorted(open_calls)} are never answered"
        )


_NONE: frozenset[str] = frozenset()


def _tool_ids(message: Any) -> tuple[frozenset[str], frozenset[str], bool]:
    """The calls a message makes to be answered in the next, the calls its results answer (a
    server tool's call, Nova's, is answered in its own message by a result with a ``type``),
    and whether it has tool blocks at all."""
    content = message.get("content") if isinstance(message, dict) else None
    calls: list[str] = []
    answered: list[str] = []
    tool_blocks = False
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if "toolUse" in block:
            tool_blocks, use = True, block["toolUse"]
            if isinstance(use, dict) and use.get("type") != SERVER_CALL:
                calls.append(str(use.get("toolUseId")))
        elif "toolResult" in block:
            tool_blocks, result = True, block["toolResult"]
            if isinstance(result, dict) and "type" not in result:
                answered.append(str(result.get("toolUseId")))
    if not tool_blocks:
        return _NONE, _NONE, False
    return frozenset(calls), frozenset(answered), True


def _output_format_problems(body: dict[str, Any]) -> list[str]:
    fmt = (body.get("outputConfig") or {}).get("textFormat")
    definition = ((fmt or {}).get("structure") or {}).get("jsonSchema")
    if not isinstance(definition, dict) or not isinstance(definition.get("schema"), str):
        return []
    _, reason = closed_schema_or_reason(json.loads(definition["schema"]))
    return [f"outputConfig.textFormat.structure.jsonSchema.schema: {reason}"] if reason else []


def _block_problems(i: int, blocks: list[Any]) -> list[str]:
    problems: list[str] = []
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict):
            problems.append(f"{where}: a content block must be an object")
            continue
        if "text" in block and not str(block["text"]).strip():
            problems.append(f"{where}: text content blocks must contain non-whitespace text")
        for kind in ("toolUse", "toolResult"):
            if kind not in block:
                continue
            tool_id = block[kind].get("toolUseId") if isinstance(block[kind], dict) else None
            if not _NAME.match(str(tool_id or "")):
                problems.append(f"{where}: toolUseId {tool_id!r} has characters Bedrock refuses")
    return problems
