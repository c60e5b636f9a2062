"""xAI's server-side tools as its Responses API reports them (docs/contract.md §11).

xAI runs ``web_search``, ``x_search`` and ``code_interpreter`` (declared as such) itself, and
tells each call it made as an output item of its own shape, as recorded replies show:

- ``web_search_call``, ``x_search_call``, ``code_interpreter_call`` (and, by xAI's API types,
  ``code_execution_call``, ``view_image_call``, ``view_x_video_call``) items carrying the call's
  ``name`` (``web_search``, ``x_semantic_search``, ``code_execution``, ...) and its ``arguments``
  as JSON text, instead of OpenAI's ``action`` or ``code``;
- ``custom_tool_call`` items named for the tool it ran (``x_keyword_search``, ``view_x_video``,
  ``browse_page``, ...), with the arguments as JSON text in ``input``.

None of them carries what the tool returned. A ``custom_tool_call`` is such a call (a server
tool's, never one for the application to run) when its name is one of xAI's server-side tools
and the reply's echo of the request's ``tools`` declares no custom tool of that name: a client
freeform tool of the same name is declared there, and a reply that echoes no tools is read as
before.
"""

from __future__ import annotations

from typing import Any

from metis.model.server_tools import CODE_EXECUTION, WEB_SEARCH
from metis.wire.openai_responses.custom import CUSTOM_CALL
from metis.wire.partial_json import parse_object

SERVER_CALL_ITEMS = {
    "x_search_call": "x_search",
    "code_execution_call": CODE_EXECUTION,
    "view_image_call": "view_image",
    "view_x_video_call": "view_x_video",
}
"""xAI's own item types for server tool calls (beside OpenAI's), and the tool each names."""

SERVER_CALL_NAMES = {
    "web_search": WEB_SEARCH,
    "web_search_with_snippets": WEB_SEARCH,
    "browse_page": "browse_page",
    "x_user_search": "x_user_search",
    "x_keyword_search": "x_keyword_search",
    "x_semantic_search": "x_semantic_search",
    "x_thread_fetch": "x_thread_fetch",
    "view_image": "view_image",
    "view_x_video": "view_x_video",
    "code_execution": CODE_EXECUTION,
}
"""The names xAI gives the calls its server-side tools make, and the canonical name of each."""


def declared_custom_tools(response: dict[str, Any]) -> frozenset[str] | None:
    """The names of the custom tools the reply's ``tools`` echo declares (None: no echo)."""
    tools = response.get("tools")
    if tools.__class__ is not list:
        return None
    return frozenset(
        tool["name"]
        for tool in tools
        if tool.__class__ is dict
        and tool.get("type") == "custom"
        and isinstance(tool.get("name"), str)
    )


def runs_on_server(item: dict[str, Any], custom_tools: frozenset[str] | None) -> bool:
    """Whether a ``custom_tool_call`` item is a call xAI's server made and ran."""
    name = item.get("name")
    return (
        custom_tools is not None
        and item.get("type") == CUSTOM_CALL
        and name.__class__ is str
        and name in SERVER_CALL_NAMES
        and name not in custom_tools
    )


def call_name(item: dict[str, Any], default: str) -> str:
    """The canonical name of a server call item: by the call's own name where xAI gives it."""
    name = item.get("name")
    return SERVER_CALL_NAMES.get(name, default) if name.__class__ is str else default


def call_arguments(item: dict[str, Any]) -> dict[str, Any]:
    """A call item's JSON ``arguments`` (or a custom call's ``input``) as an object; text that
    is not a JSON object is kept as ``{"input": text}``."""
    text = item.get("input" if item.get("type") == CUSTOM_CALL else "arguments")
    if text.__class__ is not str or not text.strip():
        return {}
    parsed = parse_object(text)
    return parsed if parsed is not None else {"input": text}
