"""Another provider's server tool calls and results, and its web citations, written in the
caller's API (docs/gateway.md, "Server tools"): Anthropic's ``server_tool_use`` and
``*_tool_result`` blocks and ``web_search_result_location`` citations; Responses'
``web_search_call`` and ``code_interpreter_call`` items. A provider's own blocks go back as it
wrote them (the writers' ``own``); these are for the others'. What an API has no block for (a
tool of another name) is left out, as the library leaves out what a provider cannot take.
The Anthropic blocks written here are marked as the gateway's (ids ``srvtoolu_metis_``, a
search result's ``encrypted_content`` and a citation's ``encrypted_index`` ``metis1.written``):
Anthropic opens only what it issued, so a history holding them never passes through to it
(:func:`written_in`) and is read as another provider's (:func:`foreign`). The Responses items
written here are marked the same way (ids ``ws_metis_``, ``ci_metis_``): OpenAI refuses an
item id it did not make, so a Responses history holding them never passes through to it
(:func:`responses_written_in`) and is read as another provider's (:func:`written_blocks`).
Sources: anthropic-sdk-python ``server_tool_use_block``, ``web_search_tool_result_block``,
``web_fetch_tool_result_block``, ``code_execution_tool_result_block``,
``citations_web_search_result_location``; openai-python
``responses/response_function_web_search.py``,
``responses/response_code_interpreter_tool_call.py``."""

from __future__ import annotations

import re
from typing import Any

from metis.gateway.provenance import each_block
from metis.model.citation import Citation
from metis.model.content import Message, TextBlock
from metis.model.server_tools import (
    CODE_EXECUTION,
    WEB_FETCH,
    WEB_SEARCH,
    ServerToolCallBlock,
    ServerToolResultBlock,
    projected_text,
)
from metis.wire.openai_responses.server_tools import server_blocks

_NOT_ID = re.compile(r"[^A-Za-z0-9_]")
_ANTHROPIC_NAMES = (WEB_SEARCH, WEB_FETCH, CODE_EXECUTION)
ID_MARK = "srvtoolu_metis_"
"""How an id of a server call the gateway wrote as Anthropic's begins."""
RESPONSES_MARKS = {"web_search_call": "ws_metis_", "code_interpreter_call": "ci_metis_"}
"""How the id of a Responses item the gateway wrote begins, by the item's type."""
SEALED = "metis1.written"
"""The ``encrypted_content`` (``encrypted_index``) of what the gateway wrote as Anthropic's."""


def anthropic_id(given: str) -> str:
    """A server call's id as Anthropic writes one (``srvtoolu_``), marked as the gateway's; the
    same for its result."""
    if given.startswith(ID_MARK):
        return given
    return ID_MARK + _NOT_ID.sub("_", given.removeprefix("srvtoolu_"))[:64]


def anthropic_block(item: ServerToolCallBlock | ServerToolResultBlock) -> dict[str, Any] | None:
    """Another provider's server call or result as Anthropic's block (None: no such block)."""
    if item.name not in _ANTHROPIC_NAMES:
        return None
    if isinstance(item, ServerToolCallBlock):
        given = item.input
        if item.name == CODE_EXECUTION:
            given = {"code": str(given.get("code") or "")}
        elif "query" in given:
            given = {"query": given["query"]}
        return {"type": "server_tool_use", "id": anthropic_id(item.id), "name": item.name,
                "input": given}  # fmt: skip
    written = {"type": f"{item.name}_tool_result", "tool_use_id": anthropic_id(item.tool_call_id)}
    if item.error is not None:
        failed = {"type": f"{written['type']}_error", "error_code": item.error}
        return {**written, "content": failed}
    return {**written, "content": _anthropic_content(item)}


def _anthropic_content(item: ServerToolResultBlock) -> Any:
    found = item.search_results or []
    if item.name == WEB_SEARCH:
        return [
            {"type": "web_search_result", "url": r.url, "title": r.title or r.url,
             "encrypted_content": SEALED, "page_age": r.page_age}
            for r in found
        ]  # fmt: skip
    if item.name == WEB_FETCH:
        page = found[0] if found else None
        source = {"type": "text", "media_type": "text/plain", "data": (page and page.snippet) or ""}
        document = {"type": "document", "source": source, "title": page and page.title}
        return {"type": "web_fetch_result", "url": page.url if page else "", "content": document}
    ran = item.code_output
    return {
        "type": "code_execution_result",
        "stdout": ran.stdout if ran else "",
        "stderr": ran.stderr if ran else "",
        "return_code": ran.exit_code if ran and ran.exit_code is not None else 0,
        "content": [{"type": "code_execution_output", "file_id": f} for f in ran.files]
        if ran
        else [],
    }


def anthropic_citation(cited: Citation, text: str) -> dict[str, Any] | None:
    """Another provider's citation of a web page as Anthropic's; None for any other kind."""
    if cited.kind != "url" or not cited.url:
        return None
    quoted = cited.cited_text or (text[cited.span.start : cited.span.end] if cited.span else "")
    return {"type": "web_search_result_location", "url": cited.url, "title": cited.title,
            "cited_text": quoted[:150], "encrypted_index": SEALED}  # fmt: skip


def written_in(body: dict[str, Any]) -> bool:
    """Whether a Messages request's history holds a server block or citation the gateway wrote
    (to pass through to Anthropic, which would refuse it)."""
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            given = block.get("id") if block.get("type") == "server_tool_use" else None
            if str(given or block.get("tool_use_id") or "").startswith(ID_MARK):
                return True
            cited = block.get("citations")
            marks = (
                (c.get("encrypted_index") for c in cited if isinstance(c, dict))
                if isinstance(cited, list)
                else ()
            )
            if SEALED in marks:
                return True
    return False


def foreign(messages: list[Message]) -> list[Message]:
    """``messages`` with the server blocks and web citations the gateway wrote read as another
    provider's (no maker: to every model the results go as text, the citations are left out)."""
    return each_block(messages, _foreign)


def _foreign(block: object) -> Any:
    if isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
        given = block.id if isinstance(block, ServerToolCallBlock) else block.tool_call_id
        return (
            block.model_copy(update={"provider_raw": None}) if given.startswith(ID_MARK) else block
        )
    if isinstance(block, TextBlock) and block.citations:
        kept = [c for c in block.citations if not _sealed(c)]
        if len(kept) < len(block.citations):
            return block.model_copy(update={"citations": kept or None})
    return block


def _sealed(cited: Citation) -> bool:
    raw = cited.provider_raw
    return raw is not None and raw.data.get("encrypted_index") == SEALED


def responses_item(
    call: ServerToolCallBlock, result: ServerToolResultBlock | None
) -> dict[str, Any] | None:
    """Another provider's server call and its result as a Responses output item (None: the
    API has no item for it)."""
    status = "failed" if result is not None and result.error is not None else "completed"
    suffix = _NOT_ID.sub("_", call.id)[:64]
    suffix = suffix.removeprefix("ws_metis_").removeprefix("ci_metis_")
    if call.name == WEB_SEARCH:
        found = (result.search_results if result is not None else None) or []
        action: dict[str, Any] = {"type": "search", "query": str(call.input.get("query") or "")}
        action["sources"] = [{"type": "url", "url": r.url} for r in found]
        item_id = RESPONSES_MARKS["web_search_call"] + suffix
        return {"id": item_id, "type": "web_search_call", "status": status, "action": action}
    if call.name != CODE_EXECUTION:
        return None
    ran = result.code_output if result is not None else None
    outputs: list[dict[str, Any]] = []
    if ran is not None and (ran.stdout or ran.stderr):
        outputs.append({"type": "logs", "logs": ran.stdout + ran.stderr})
    outputs += [{"type": "image", "url": f} for f in (ran.files if ran else [])]
    return {
        "id": RESPONSES_MARKS["code_interpreter_call"] + suffix,
        "type": "code_interpreter_call",
        "status": status,
        "code": str(call.input.get("code") or ""),
        "container_id": str(call.input.get("container_id") or ""),
        "outputs": outputs,
    }


def written_item(item: Any) -> bool:
    """Whether a Responses input item is a server call item the gateway wrote."""
    if not isinstance(item, dict):
        return False
    mark = RESPONSES_MARKS.get(str(item.get("type")))
    return mark is not None and str(item.get("id") or "").startswith(mark)


def responses_written_in(body: dict[str, Any]) -> bool:
    """Whether a Responses request's ``input`` holds an item the gateway wrote (to pass
    through to OpenAI, which would refuse its id)."""
    items = body.get("input")
    return isinstance(items, list) and any(written_item(item) for item in items)


def written_blocks(item: dict[str, Any]) -> list[ServerToolCallBlock | ServerToolResultBlock]:
    """A server call item the gateway wrote (or OpenAI's own, sent back on the translated
    path) as another provider's call and result (no maker: to every model the result goes as
    text)."""
    call, result = server_blocks(item)
    return [
        call.model_copy(update={"provider_raw": None}),
        result.model_copy(update={"provider_raw": None}),
    ]


def as_text(messages: list[Message], reported: list[str]) -> list[Message]:
    """``messages`` with every server call and result as text (:func:`projected_text`), for
    an upstream that has not seen them and would not find their ids; a result with nothing
    readable is left out and named in ``reported``."""
    out = []
    for message in messages:
        if not any(
            isinstance(b, ServerToolCallBlock | ServerToolResultBlock) for b in message.content
        ):
            out.append(message)
            continue
        calls = {b.id: b for b in message.content if isinstance(b, ServerToolCallBlock)}
        content: list[Any] = []
        for block in message.content:
            if isinstance(block, ServerToolResultBlock):
                said = projected_text(block, calls.get(block.tool_call_id))
                if said is None:
                    reported.append(f"a {block.name} result of previous_response_id (unreadable)")
                else:
                    content.append(TextBlock(text=said))
            elif not isinstance(block, ServerToolCallBlock):
                content.append(block)
        out.append(message.model_copy(update={"content": content}))
    return out
