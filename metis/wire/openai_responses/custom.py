"""Freeform tools as the Responses API's custom tools (docs/contract.md §10): the SDK's
``CustomToolParam`` (``{type: custom, name, description, format}``, the format ``text`` or a
``grammar`` with its ``syntax`` and ``definition``), ``ResponseCustomToolCallParam`` and
``ResponseCustomToolCallOutputParam``.

A call is a custom call when its tool is declared freeform in the request, or when this
provider made it as one (its ``provider_raw`` says ``type: custom_tool_call``); its input is
the call's ``{"input": "<text>"}``.
"""

from __future__ import annotations

from typing import Any

from metis.model.content import ToolUseBlock
from metis.model.request import ToolDefinition
from metis.wire.openai_chat.encode import freeform_text

CUSTOM_CALL = "custom_tool_call"


def custom_tool(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "custom", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    freeform = tool.freeform
    if freeform is not None and freeform.syntax is not None:
        out["format"] = {
            "type": "grammar",
            "syntax": freeform.syntax,
            "definition": freeform.definition,
        }
    else:
        out["format"] = {"type": "text"}
    return out


def is_custom(block: ToolUseBlock, mine: dict[str, Any], custom: frozenset[str]) -> bool:
    return block.name in custom or mine.get("type") == CUSTOM_CALL


def custom_call(block: ToolUseBlock, mine: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"type": CUSTOM_CALL}
    if isinstance(mine.get("id"), str) and mine.get("call_id") == block.id:
        item["id"] = mine["id"]  # only where the call id is still the one OpenAI issued
    item.update(call_id=block.id, name=block.name, input=freeform_text(block.input))
    return item
