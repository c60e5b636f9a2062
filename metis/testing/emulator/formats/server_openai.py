"""Server tools in OpenAI's replies (:mod:`..server_tools` writes them once).

Responses: a ``web_search_call`` item per search (``action.sources`` only when ``include``
asks for ``web_search_call.action.sources``: URLs, no titles) and a ``code_interpreter_call``
item per run (``outputs``, its logs, only with ``code_interpreter_call.outputs``), before the
message, whose ``output_text`` cites each result in a ``url_citation`` annotation (the
gateway's writer streams them, with the items' own progress events). Chat: the
search models' ``message.annotations`` (``url_citation``, nested), in a delta when streamed;
Perplexity's Sonar lists its sources at the top level instead (``citations``, and
``search_results`` with titles, on every chunk) and xAI's Grok its ``citations`` (on the last
chunk). Chat runs no code. Sources: openai-python ``responses/response_function_web_search.py``,
``responses/response_code_interpreter_tool_call.py``, ``responses/response_output_text.py``,
``responses/response_stream_event.py``, ``chat/chat_completion_message.py``;
https://docs.perplexity.ai/api-reference/chat-completions-post; docs.x.ai "Live Search".
"""

from __future__ import annotations

import re
from typing import Any

from metis.model.citation import Citation, TextSpan
from metis.testing.emulator.model import Reply
from metis.testing.emulator.server_tools import ServerOut
from metis.testing.emulator.wire import Ids

SOURCES = "web_search_call.action.sources"
OUTPUTS = "code_interpreter_call.outputs"
PERPLEXITY = re.compile(r"^(sonar|r1-1776)")
XAI = re.compile(r"^grok")


def cited(reply: Reply) -> list[tuple[str, str]]:
    """The (url, title) of every result the reply's text cites."""
    if not reply.cite or not reply.text:
        return []
    return [found for out in reply.server for found in out.results]


# Responses --------------------------------------------------------------------------------


def responses_items(reply: Reply, include: list[str], ids: Ids) -> list[dict[str, Any]]:
    """The reply's server tools as Responses output items."""
    return [_item(out, include, ids) for out in reply.server]


def _item(out: ServerOut, include: list[str], ids: Ids) -> dict[str, Any]:
    if out.name == "web_search":
        action: dict[str, Any] = {"type": "search", "query": out.input.get("query", "")}
        if SOURCES in include:
            action["sources"] = [{"type": "url", "url": url} for url, _ in out.results]
        item_id = "ws_" + ids.token(48, "hex")
        return {"id": item_id, "type": "web_search_call", "status": "completed", "action": action}
    logs = out.stdout + out.stderr
    return {
        "id": "ci_" + ids.token(48, "hex"),
        "type": "code_interpreter_call",
        "status": "completed" if out.exit_code == 0 else "failed",
        "code": out.input.get("code", ""),
        "container_id": "cntr_" + ids.token(48, "hex"),
        "outputs": ([{"type": "logs", "logs": logs}] if logs else [])
        if OUTPUTS in include
        else None,
    }


def citations(reply: Reply) -> list[Citation]:
    """Each cited result, for the whole text."""
    span = TextSpan(start=0, end=len(reply.text))
    return [Citation(kind="url", url=url, title=title, span=span) for url, title in cited(reply)]


# Chat -------------------------------------------------------------------------------------


def chat_citations(reply: Reply, model: str) -> list[Citation]:
    """A search model's ``message.annotations``, each a citation of the whole text (none from
    Perplexity or xAI: they list)."""
    return [] if PERPLEXITY.match(model) or XAI.match(model) else citations(reply)


def source_lists(reply: Reply, model: str) -> dict[str, Any]:
    """The top-level source lists Perplexity (and xAI) put beside the choices."""
    found = cited(reply)
    if not found or not (PERPLEXITY.match(model) or XAI.match(model)):
        return {}
    urls = {"citations": [url for url, _ in found]}
    if XAI.match(model):
        return urls
    results = [{"title": title, "url": url, "date": None} for url, title in found]
    return {**urls, "search_results": results}


def lists_on_every_chunk(model: str) -> bool:
    """Perplexity repeats its lists on every chunk; xAI sends them on the last."""
    return bool(PERPLEXITY.match(model))
