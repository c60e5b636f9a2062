"""The text syntax a model without tool calling is taught to write calls in, and reads its
results in (the one Hermes and Qwen models were trained on)::

    <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>
    <tool_result name="get_weather" id="tu_...">...</tool_result>
"""

from __future__ import annotations

import html
import json
from typing import Any

from metis.model.content import ToolResultBlock

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
RESULT = "<tool_result"
RESULT_CLOSE = "</tool_result>"


def render_call(name: str, arguments: dict[str, Any]) -> str:
    """One tool call in the syntax the preamble teaches."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN}{body}{CLOSE}"


def render_result_open(block: ToolResultBlock, name: str | None) -> str:
    """The opening tag of a tool result: the tool's name (when known), the call's id, and
    ``is_error="true"`` for a failed call."""
    attrs = f' name="{html.escape(name)}"' if name else ""
    attrs += f' id="{html.escape(block.tool_use_id)}"'
    if block.is_error:
        attrs += ' is_error="true"'
    return f"{RESULT}{attrs}>"
