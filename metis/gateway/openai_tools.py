"""OpenAI clients' custom tools and tool choices, in Chat's form and in Responses', read into
canonical terms.

* A custom (freeform) tool's format is ``text`` or a ``grammar``: nested in Chat
  (``{type: grammar, grammar: {syntax, definition}}``), flat in Responses
  (``{type: grammar, syntax, definition}``).
* ``allowed_tools`` (``{mode: auto | required, tools: [...]}``; in Chat under the key
  ``allowed_tools``) lets the model call only the listed function and custom tools: the tools
  sent are narrowed to them and the choice is ``auto`` or ``any``, which means the same to
  every provider.
* A hosted tool as the choice (Responses: ``web_search_preview``, ``file_search``, ``mcp``...)
  has no canonical form, as hosted tools themselves have none here: it is left out and
  reported, and the model chooses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.inbound import LOGPROBS_RANGE, flag, sampling
from metis.model.request import FreeformInput, ToolChoice, ToolDefinition

_NAMED = {"auto": "auto", "required": "any", "none": "none"}
_CHAT_NAMED = {**_NAMED, "any": "any"}
_MODES = {"auto": "auto", "required": "any"}
Choice = tuple[ToolChoice | None, frozenset[str] | None]
"""The tool choice, and the names of the tools the model may call when ``allowed_tools``
narrowed them (None: every tool sent)."""


def custom_tool(raw: Any, where: str) -> ToolDefinition:
    """A custom (freeform) tool: free text input, or text held to a ``grammar`` format."""
    if not isinstance(raw, Mapping):
        raise InvalidRequestError(f"{where}: expected an object")
    name, description = raw.get("name"), raw.get("description")
    if not isinstance(name, str) or not name:
        raise InvalidRequestError(f"{where}.name: expected a non-empty string")
    fmt = raw.get("format") or {"type": "text"}
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind == "text":
        freeform = FreeformInput()
    elif kind == "grammar":
        grammar = fmt.get("grammar", fmt)
        syntax = grammar.get("syntax") if isinstance(grammar, Mapping) else None
        definition = grammar.get("definition") if isinstance(grammar, Mapping) else None
        if syntax not in ("lark", "regex") or not isinstance(definition, str) or not definition:
            raise InvalidRequestError(
                f"{where}.format: a grammar needs a syntax (lark or regex) and a definition"
            )
        freeform = FreeformInput(syntax=syntax, definition=definition)
    else:
        raise InvalidRequestError(f"{where}.format: expected a text or grammar format")
    text = description if isinstance(description, str) else ""
    return ToolDefinition(name=name, description=text, freeform=freeform)


def chat_tool_choice(raw: Any, ignored: list[str], legacy: bool = False) -> Choice:
    """Chat's ``tool_choice`` (or the deprecated ``function_call`` when ``legacy``)."""
    if raw is None:
        return None, None
    if isinstance(raw, str) and raw in _CHAT_NAMED:
        return ToolChoice(type=_CHAT_NAMED[raw]), None
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind == "allowed_tools" and not legacy:
        where = "tool_choice.allowed_tools"
        return _allowed(raw.get("allowed_tools"), where, ignored, nested=True)
    chosen: Any = None
    if kind == "tool" or (kind is None and isinstance(raw, Mapping) and "function" not in raw):
        chosen = raw
    elif isinstance(raw, Mapping):
        chosen = raw.get("custom" if kind == "custom" else "function")
    if isinstance(chosen, Mapping) and isinstance(chosen.get("name"), str):
        return ToolChoice.tool(chosen["name"]), None
    raise InvalidRequestError(
        "tool_choice: expected auto, required (or any), none, {type: function, function: "
        "{name}}, {type: custom, custom: {name}}, {type: tool, name} or {type: allowed_tools, "
        "allowed_tools: {mode, tools}} (function_call: auto, none or {name})"
    )


def responses_tool_choice(raw: Any, ignored: list[str]) -> Choice:
    """Responses' ``tool_choice``; a hosted tool's is reported in ``ignored``."""
    if raw is None:
        return None, None
    if isinstance(raw, str) and raw in _NAMED:
        return ToolChoice(type=_NAMED[raw]), None
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind == "allowed_tools":
        return _allowed(raw, "tool_choice", ignored, nested=False)
    if kind in ("function", "custom") and isinstance(raw.get("name"), str):
        return ToolChoice.tool(raw["name"]), None
    if isinstance(kind, str) and kind not in ("function", "custom"):
        ignored.append(f"tool_choice ({kind[:40]})")
        return None, None
    raise InvalidRequestError(
        "tool_choice: expected auto, required, none, {type: function | custom, name}, "
        "{type: allowed_tools, mode, tools} or a hosted tool"
    )


def narrowed(tools: Sequence[ToolDefinition], allowed: frozenset[str]) -> list[ToolDefinition]:
    """``tools`` the model may call under ``allowed_tools``."""
    kept = [tool for tool in tools if tool.name in allowed]
    if not kept:
        raise InvalidRequestError(
            "tool_choice: allowed_tools names none of the function or custom tools sent"
        )
    return kept


def tool_and_sampling_fields(
    body: Mapping[str, Any], tools: list[ToolDefinition], chosen: Choice
) -> dict[str, Any]:
    """The canonical fields Chat and Responses requests give alike: the tools (narrowed to
    ``allowed_tools``), the tool choice, ``parallel_tool_calls``, ``temperature`` and ``top_p``
    (``top_logprobs``, which no model is asked for, checked as OpenAI checks it)."""
    fields: dict[str, Any] = {}
    choice, allowed = chosen
    if allowed is not None:
        tools = narrowed(tools, allowed)
    if tools:
        fields["tools"] = tools
    if choice is not None:
        fields["tool_choice"] = choice
    if body.get("parallel_tool_calls") is not None:
        fields["parallel_tool_calls"] = flag(body, "parallel_tool_calls")
    fields.update(sampling(body, ("temperature", "top_p")))
    sampling(body, ("top_logprobs",), LOGPROBS_RANGE)  # left out, but checked
    return fields


def _allowed(raw: Any, where: str, ignored: list[str], *, nested: bool) -> Choice:
    mode = raw.get("mode") if isinstance(raw, Mapping) else None
    if not isinstance(mode, str) or mode not in _MODES:
        raise InvalidRequestError(f"{where}.mode: expected auto or required")
    listed = raw.get("tools")
    if not isinstance(listed, list) or not listed:
        raise InvalidRequestError(f"{where}.tools: expected a non-empty list of tools")
    names = set()
    for i, tool in enumerate(listed):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind not in ("function", "custom"):
            continue  # a hosted tool, which has no canonical form here
        named = tool.get(kind) if nested else tool
        name = named.get("name") if isinstance(named, Mapping) else None
        if not isinstance(name, str) or not name:
            inner = f".{kind}" if nested else ""
            raise InvalidRequestError(f"{where}.tools[{i}]{inner}.name: expected a tool name")
        names.add(name)
    if not names:
        ignored.append("tool_choice (allowed_tools: hosted tools only)")
        return None, None
    return ToolChoice(type=_MODES[raw["mode"]]), frozenset(names)
