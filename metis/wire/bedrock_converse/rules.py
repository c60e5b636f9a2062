"""What Bedrock's Converse API refuses with a ValidationException, checked before sending.

The same rules the Converse API reference and its error messages state: the conversation
starts with a user message and alternates roles, no message is empty, no text block is blank,
tool ids and names match ``[a-zA-Z0-9_-]{1,64}``, tool blocks need a ``toolConfig``, and every
``toolUse`` is answered by a ``toolResult`` in the next message and only there (a server
tool's, ``type: "server_tool_use"``, in the assistant message that holds it), files keep the
limits of metis/wire/bedrock_converse/media.py, and a structured output schema closes every
object.
"""

from __future__ import annotations

import json
import re
from typing import Any

from metis.wire.bedrock_converse.media import message_files
from metis.wire.closed_schema import closed_schema_or_reason

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def converse_problems(body: dict[str, Any]) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    has_tools = bool((body.get("toolConfig") or {}).get("tools"))
    pending: list[str] = []
    previous = None
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if i == 0 and role != "user":
            problems.append("messages.0: a conversation must start with a user message")
        if role == previous:
            problems.append(f"messages.{i}: roles must alternate between user and assistant")
        previous = role
        blocks = message.get("content") if isinstance(message, dict) else None
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"messages.{i}: content must not be empty")
            continue
        problems += _block_problems(i, blocks, has_tools)
        files = message_files(i, role, [b for b in blocks if isinstance(b, dict)])
        problems += [refusal.message for refusal in files]
        results = [b["toolResult"].get("toolUseId") for b in blocks if "toolResult" in b]
        if role == "user" and (pending or results) and sorted(map(str, results)) != sorted(pending):
            problems.append(
                f"messages.{i}: toolUse ids {pending} need toolResult blocks here, found {results}"
            )
        pending = [  # a server tool's call (Nova's) is answered in its own message
            str(b["toolUse"].get("toolUseId"))
            for b in blocks
            if "toolUse" in b and b["toolUse"].get("type") != "server_tool_use"
        ]
    if pending:
        problems.append(f"messages.{len(messages) - 1}: toolUse ids {pending} are never answered")
    for j, tool in enumerate((body.get("toolConfig") or {}).get("tools") or []):
        if "toolSpec" not in tool:
            continue  # a cache checkpoint, or a system tool (Nova's) named by AWS
        name = (tool.get("toolSpec") or {}).get("name")
        if not _NAME.match(str(name or "")):
            problems.append(f"toolConfig.tools.{j}: tool name {name!r} must match [a-zA-Z0-9_-]")
    return problems + _output_format_problems(body)


def _output_format_problems(body: dict[str, Any]) -> list[str]:
    fmt = (body.get("outputConfig") or {}).get("textFormat")
    definition = ((fmt or {}).get("structure") or {}).get("jsonSchema")
    if not isinstance(definition, dict) or not isinstance(definition.get("schema"), str):
        return []
    _, reason = closed_schema_or_reason(json.loads(definition["schema"]))
    return [f"outputConfig.textFormat.structure.jsonSchema.schema: {reason}"] if reason else []


def _block_problems(i: int, blocks: list[Any], has_tools: bool) -> list[str]:
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
            if not has_tools:
                problems.append(f"{where}: {kind} blocks need the request's toolConfig")
            tool_id = block[kind].get("toolUseId") if isinstance(block[kind], dict) else None
            if not _NAME.match(str(tool_id or "")):
                problems.append(f"{where}: toolUseId {tool_id!r} has characters Bedrock refuses")
    return problems
