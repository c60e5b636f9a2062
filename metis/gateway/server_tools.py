"""Server tools on the translated path (docs/gateway.md, "Server tools"): a tool the provider
runs itself, asked for in the caller's API (Anthropic's ``web_search``, ``web_fetch``,
``code_execution``; Responses' ``web_search``, ``code_interpreter``; Chat's
``web_search_options``), read as the library's own
declaration (:mod:`metis.model.server_tools`), which each stack maps to its provider's tool.
What the routed model cannot take (the tool, or options of it) is left out and reported, never
refused (metis.gateway.server_fit)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from metis.errors import InvalidRequestError
from metis.model.server_tools import (
    CodeExecution,
    UserLocation,
    WebFetch,
    WebSearch,
)

Declared = WebSearch | WebFetch | CodeExecution
"""A server tool a caller's API declares that metis has a form for."""
LABELS = "server_tool_labels"
"""``Inbound.options``' key for how each declared server tool is named when left out."""
_RESPONSES_SEARCH = ("web_search", "web_search_preview", "web_search_2025_08_26")


def anthropic_tool(tool: Mapping[str, Any], where: str) -> Declared | None:
    """A Messages tool entry of ``type`` ``web_search_*``, ``web_fetch_*`` or
    ``code_execution_*`` as its declaration; None for any other server tool."""
    kind = str(tool.get("type"))
    if kind.startswith("web_search_"):
        return _made(WebSearch, where, **_filters(tool), user_location=_where(tool))
    if kind.startswith("web_fetch_"):
        cites = tool.get("citations")
        cited = isinstance(cites, Mapping) and cites.get("enabled") is True
        tokens = tool.get("max_content_tokens")
        return _made(WebFetch, where, **_filters(tool), citations=cited, max_content_tokens=tokens)
    if kind.startswith("code_execution_"):
        return CodeExecution()
    return None


def responses_tool(tool: Mapping[str, Any], where: str) -> Declared | None:
    """A Responses tool entry of ``type`` ``web_search`` (or ``web_search_preview``) or
    ``code_interpreter`` as its declaration; None for any other hosted tool."""
    kind = tool.get("type")
    if kind in _RESPONSES_SEARCH:
        filters = tool.get("filters")
        allowed = filters.get("allowed_domains") if isinstance(filters, Mapping) else None
        return _made(
            WebSearch,
            where,
            allowed_domains=allowed or [],
            context_size=tool.get("search_context_size"),
            user_location=_where(tool),
        )
    if kind == "code_interpreter":
        container = tool.get("container")
        return CodeExecution(container=container if isinstance(container, str) else None)
    return None


def chat_search(options: Any) -> Declared | None:
    """Chat Completions' ``web_search_options`` (a search model's search: its
    ``search_context_size``, ``user_location.approximate``) as a web search declaration; None
    when the request has none. Given at all, even empty, it asks for a search."""
    where = "web_search_options"
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise InvalidRequestError(f"{where}: expected an object")
    located = options.get("user_location")
    approximate = located.get("approximate") if isinstance(located, Mapping) else None
    return _made(
        WebSearch,
        where,
        context_size=options.get("search_context_size"),
        user_location=_where({"user_location": approximate}),
    )


def unmapped_options(tool: Mapping[str, Any], where: str) -> list[str]:
    """What of a Responses hosted tool's entry its declaration does not carry, named: a code
    interpreter's container given as options (its ``file_ids``, ``memory_limit``), which only
    OpenAI's tool reads."""
    container = tool.get("container")
    if tool.get("type") != "code_interpreter" or not isinstance(container, Mapping):
        return []
    return [f"{where}.container.{name}" for name in sorted(container) if name != "type"]


def _filters(tool: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "max_uses": tool.get("max_uses"),
        "allowed_domains": tool.get("allowed_domains") or [],
        "blocked_domains": tool.get("blocked_domains") or [],
    }


def _where(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    found = tool.get("user_location")
    if not isinstance(found, Mapping):
        return None
    return {k: v for k, v in found.items() if k in UserLocation.model_fields and v is not None}


def _made(kind: type[Declared], where: str, **given: Any) -> Declared:
    try:
        return kind(**given)
    except ValidationError as exc:
        error = exc.errors()[0]
        at = ".".join(str(part) for part in error["loc"])
        raise InvalidRequestError(f"{where}{'.' + at if at else ''}: {error['msg']}") from None
