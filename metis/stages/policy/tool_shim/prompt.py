"""The text that offers tools to a model with no tool calling: a preamble for the system
prompt (the tools as JSON, the exact call syntax, what ``tool_choice`` demands), or the first
user turn when the model takes no system prompt."""

from __future__ import annotations

import json

from metis.model.request import ToolChoice, ToolDefinition
from metis.stages.policy.system_hoist import into_first_user_turn

__all__ = ["NO_TOOLS", "into_first_user_turn", "preamble"]

NO_TOOLS = (
    "No tools are available for this reply: answer in plain text, without any <tool_call> tag."
)


def preamble(tools: list[ToolDefinition], choice: ToolChoice | None, parallel: bool) -> str:
    """The system-prompt text that offers ``tools`` to a model with no tool calling."""
    listing = "\n".join(
        json.dumps(
            {"name": t.name, "description": t.description, "parameters": t.input_schema},
            ensure_ascii=False,
        )
        for t in tools
    )
    if parallel:
        how_many = (
            "To make several calls at once, write one <tool_call> tag per call, one after another."
        )
    else:
        how_many = "Make at most one tool call in a reply."
    if choice is not None and choice.type == "any":
        demand = "In this reply you must call at least one of the tools."
    elif choice is not None and choice.type == "tool":
        demand = f'In this reply you must call the tool "{choice.name}".'
    else:
        demand = (
            "Call a tool when it helps you answer; otherwise answer in plain text, without any "
            "<tool_call> tag."
        )
    return (
        "# Tools\n\n"
        "You can call the tools listed in <tools></tools> below, one JSON object per line: "
        "each tool's name, its description, and the JSON Schema of its arguments.\n\n"
        f"<tools>\n{listing}\n</tools>\n\n"
        "To call a tool, write exactly this, with the tool's name and its arguments as a JSON "
        "object that matches its schema:\n"
        '<tool_call>{"name": "<tool name>", "arguments": {<arguments>}}</tool_call>\n\n'
        f"{how_many} After your tool calls, end your reply and wait: each result comes back "
        'in the next message as <tool_result name="<tool name>" id="<call id>">...'
        '</tool_result> (with is_error="true" when the call failed). Never write a '
        "<tool_result> yourself.\n\n"
        f"{demand}"
    )
