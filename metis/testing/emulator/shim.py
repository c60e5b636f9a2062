"""Tools offered in the system prompt (Hermes-style ``<tools>`` JSON lines, as metis's
``tool_shim`` writes them) for models served without native tool calling: the model sees them
as real tools and ``<tool_result name=...>`` tags in user text as results, and its calls go out
as ``<tool_call>{...}</tool_call>`` tags in the text, as an open model's template writes them.
Whatever answers (the scripted model, a script, a function) is read this way.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from metis.testing.emulator.model import Prompt, Reply, ResultIn, ToolSpec, Turn
from metis.testing.emulator.wire import object_at

_SHIM_TOOLS = re.compile(r"<tools>\s*(.*?)\s*</tools>", re.DOTALL)
_SHIM_RESULT = re.compile(r"<tool_result\b([^>]*)>(.*?)</tool_result>", re.DOTALL)
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_SHIM_SECTION = re.compile(r"(?:\n\n)?# Tools\n\n.*", re.DOTALL)


def unshimmed(prompt: Prompt) -> Prompt | None:
    """The prompt with the tools its system prompt declares as real ones (and the shim's
    section left out of the system prompt, the caller's own text kept); None when it declares
    none or the request has real tools."""
    if prompt.tools or "<tools>" not in prompt.system:
        return None
    tools: list[ToolSpec] = []
    for line in max(_SHIM_TOOLS.findall(prompt.system), key=len, default="").splitlines():
        try:
            spec = json.loads(line)
        except ValueError:
            continue
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            description = str(spec.get("description") or "")
            tools.append(ToolSpec(spec["name"], description, object_at(spec, "parameters")))
    if not tools:
        return None
    turns = [_read_results(t) for t in prompt.turns]
    return replace(prompt, tools=tools, turns=turns, system=_SHIM_SECTION.sub("", prompt.system))


def _read_results(turn: Turn) -> Turn:
    found = list(_SHIM_RESULT.finditer(turn.text)) if turn.role == "user" else []
    if not found:
        return turn
    results = []
    for tag in found:
        attrs = dict(_ATTR.findall(tag.group(1)))
        error = attrs.get("is_error") == "true"
        results.append(
            ResultIn(attrs.get("id", ""), tag.group(2).strip(), attrs.get("name"), error)
        )
    return Turn(role="user", text=_SHIM_RESULT.sub("", turn.text).strip(), results=results)


def as_tags(reply: Reply) -> Reply:
    """The reply's calls written as ``<tool_call>`` tags after its text."""
    if reply.calls:
        calls = [{"name": c.name, "arguments": c.args} for c in reply.calls]
        reply.text += "".join(
            f"<tool_call>{json.dumps(c, ensure_ascii=False)}</tool_call>" for c in calls
        )
        reply.calls = []
    return reply
