"""Tool lists written in OpenAI's or Anthropic's request form, read as ToolDefinitions.

A team moving to metis has its tools as the provider's dicts (in code, or stored beside the
history): :func:`from_openai_tools` reads OpenAI's (Chat's ``{"type": "function",
"function": {...}}`` or Responses' flat ``{"type": "function", "name": ...}``),
:func:`from_anthropic_tools` Anthropic's (``{"name", "description", "input_schema"}``). A key
the form has and metis has no place for, a provider's own tool (web search, ...) or a field of
the wrong type is an InvalidRequestError naming the tool and the field, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from metis.errors import InvalidRequestError
from metis.histories.reading import built, mapping, plain, shown, text
from metis.model.request import ToolDefinition

_CHAT_FUNCTION = frozenset({"name", "description", "parameters", "strict"})
_RESPONSES_FUNCTION = _CHAT_FUNCTION | {"type"}
_ANTHROPIC = frozenset({"name", "description", "input_schema", "strict", "type"})
_SERVER_TOOLS = (
    "a provider's own tool is metis.WebSearch, metis.WebFetch, metis.CodeExecution or "
    "metis.ProviderTool(...), given in tools= as it is"
)
_FREEFORM = "a custom tool is metis.ToolDefinition(name=..., freeform=metis.FreeformInput(...))"
_CACHED = "the tools are cached by the call's cache policy (cache=, docs/caching.md)"


def from_openai_tools(tools: Iterable[Any]) -> list[ToolDefinition]:
    """ToolDefinitions from an OpenAI ``tools`` list: Chat Completions' ``{"type":
    "function", "function": {"name", "description", "parameters", "strict"}}`` or the Responses
    API's ``{"type": "function", "name", "description", "parameters", "strict"}``."""
    out = []
    for index, raw in enumerate(_listed(tools)):
        where = f"tools[{index}]"
        item = mapping(plain(raw), where)
        kind = item.get("type")
        if kind != "function":
            raise InvalidRequestError(f"{where}.type: {_not_a_function(kind)}")
        if "function" in item:
            _only(item, frozenset({"type", "function"}), where)
            where += ".function"
            item = mapping(item["function"], where)
            _only(item, _CHAT_FUNCTION, where)
        else:
            _only(item, _RESPONSES_FUNCTION, where)
        out.append(_definition(item, where, "parameters"))
    return out


def from_anthropic_tools(tools: Iterable[Any]) -> list[ToolDefinition]:
    """ToolDefinitions from an Anthropic ``tools`` list of client tools: ``{"name",
    "description", "input_schema", "strict"}`` (``type`` ``custom`` or none)."""
    out = []
    for index, raw in enumerate(_listed(tools)):
        where = f"tools[{index}]"
        item = mapping(plain(raw), where)
        if item.get("type", "custom") != "custom":
            raise InvalidRequestError(f"{where}.type: {item.get('type')!r:.60}: {_SERVER_TOOLS}")
        if "cache_control" in item:
            raise InvalidRequestError(f"{where}.cache_control: {_CACHED}")
        _only(item, _ANTHROPIC, where)
        out.append(_definition(item, where, "input_schema"))
    return out


def _listed(tools: Any) -> list[Any]:
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise InvalidRequestError(f"tools: expected a list of tools, got {shown(tools)}")
    return list(tools)


def _not_a_function(kind: Any) -> str:
    if kind == "custom":
        return f"'custom': {_FREEFORM}"
    if isinstance(kind, str):
        return f"{kind[:60]!r}: {_SERVER_TOOLS}"
    return f"expected 'function', got {shown(kind)}"


def _only(item: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(str(key) for key in item if key not in known)
    if unknown:
        raise InvalidRequestError(
            f"{where}.{unknown[0][:60]}: not a field of a tool metis reads (it reads "
            f"{', '.join(sorted(known))})"
        )


def _definition(item: Mapping[str, Any], where: str, schema_key: str) -> ToolDefinition:
    name = text(item, "name", where, default=None)
    description = text(item, "description", where) if item.get("description") else ""
    schema = item.get(schema_key)
    if schema is not None and not isinstance(schema, dict):
        raise InvalidRequestError(f"{where}.{schema_key}: expected an object, got {shown(schema)}")
    strict = item.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidRequestError(f"{where}.strict: expected true or false, got {shown(strict)}")
    fields: dict[str, Any] = {"name": name, "description": description, "strict": strict}
    if schema is not None:
        fields["input_schema"] = schema
    return built(ToolDefinition, where, **fields)
