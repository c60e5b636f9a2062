"""Anthropic's server tools and citations (docs/contract.md §11, §12).

Declared as ``web_search_20250305``, ``web_fetch_20250910`` (beta ``web-fetch-2025-09-10``) and
``code_execution_20250825`` (beta ``code-execution-2025-08-25``). A reply holds
``server_tool_use`` blocks (streamed like a tool call's input) and ``*_tool_result`` blocks
(whole at ``content_block_start``); text blocks carry ``citations`` (streamed as
``citations_delta``). Sources: the anthropic-sdk-python types ``web_search_tool_20250305_param``,
``web_fetch_tool_20250910_param``, ``server_tool_use_block``, ``web_search_tool_result_block``,
``code_execution_tool_result_block``, ``text_citation``.
"""

from __future__ import annotations

from typing import Any

from metis.model.citation import Citation, DocumentLocation
from metis.model.content import ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.server_tools import (
    CodeExecution,
    CodeOutput,
    ProviderTool,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
    UserLocation,
    WebFetch,
    WebSearch,
    goes_only_to,
)
from metis.wire.codec import EncodeContext, refuse_request

BETAS = {
    "web_fetch_20250910": "web-fetch-2025-09-10",
    "code_execution_20250825": "code-execution-2025-08-25",
}
_UNIT = {"char_location": "char", "page_location": "page", "content_block_location": "block"}
_RANGE = {"char": "char_index", "page": "page_number", "block": "block_index"}


def declarations(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
    """The request's server tools as Anthropic tool entries."""
    out: list[dict[str, Any]] = []
    for tool in request.server_tools:
        if isinstance(tool, WebSearch):
            if tool.context_size is not None:
                refuse_request(call, "Anthropic web search takes no context_size")
            entry = {"type": "web_search_20250305", "name": "web_search", **_filters(tool)}
            if tool.user_location is not None:
                entry["user_location"] = _location(tool.user_location)
        elif isinstance(tool, WebFetch):
            entry = {"type": "web_fetch_20250910", "name": "web_fetch", **_filters(tool)}
            if tool.citations:
                entry["citations"] = {"enabled": True}
            if tool.max_content_tokens is not None:
                entry["max_content_tokens"] = tool.max_content_tokens
        elif isinstance(tool, CodeExecution):
            entry = {"type": "code_execution_20250825", "name": "code_execution"}
        else:
            entry = provider_tool(tool, "anthropic", call)
        out.append(entry)
    return out


def provider_tool(tool: ProviderTool, dialect: str, call: EncodeContext) -> dict[str, Any]:
    """A provider's own tool as its entry, for a stack of that wire ``dialect`` only."""
    if tool.dialect != dialect:
        refuse_request(call, goes_only_to(tool))
    entry: dict[str, Any] = {"type": tool.type}
    if tool.name is not None:
        entry["name"] = tool.name
    return {**entry, **tool.options}


def container(request: CanonicalRequest) -> str | None:
    """The code execution container to reuse, if one is named."""
    ids = [t.container for t in request.server_tools if isinstance(t, CodeExecution)]
    return next((i for i in ids if i), None)


def beta_header(tools: list[dict[str, Any]]) -> str | None:
    """The ``anthropic-beta`` value the declared tools need, if any."""
    betas = sorted({BETAS[t["type"]] for t in tools if t.get("type") in BETAS})
    return ",".join(betas) or None


def _filters(tool: WebSearch | WebFetch) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if tool.max_uses is not None:
        out["max_uses"] = tool.max_uses
    if tool.allowed_domains:
        out["allowed_domains"] = list(tool.allowed_domains)
    if tool.blocked_domains:
        out["blocked_domains"] = list(tool.blocked_domains)
    return out


def _location(where: UserLocation) -> dict[str, Any]:
    return {"type": "approximate", **where.model_dump(exclude_none=True)}


# Reading ---------------------------------------------------------------------------------


def call_block(block: dict[str, Any], input_: dict[str, Any]) -> ServerToolCallBlock:
    """A ``server_tool_use`` block with its whole input."""
    raw = {**block, "input": input_}
    return ServerToolCallBlock(
        id=str(block["id"]), name=str(block["name"]), input=input_, provider_raw=_raw(raw)
    )


def result_block(block: dict[str, Any], name: str) -> ServerToolResultBlock:
    """A ``*_tool_result`` block: search results, code output or an error where it holds
    them; its whole payload stays in ``provider_raw``."""
    content = block.get("content")
    fields: dict[str, Any] = {}
    if isinstance(content, list):
        results = [
            r for r in content if isinstance(r, dict) and r.get("type") == "web_search_result"
        ]
        fields["search_results"] = [_search_result(r) for r in results]
    elif isinstance(content, dict):
        fields = _result_fields(content)
    return ServerToolResultBlock(
        tool_call_id=str(block.get("tool_use_id", "")),
        name=name,
        provider_raw=_raw(block),
        **fields,
    )


def _result_fields(content: dict[str, Any]) -> dict[str, Any]:
    kind = str(content.get("type", ""))
    if "error_code" in content and kind.endswith("error"):
        return {"error": str(content["error_code"])}
    if kind == "web_fetch_result":
        document = content.get("content")
        return {
            "search_results": [_fetched(content, document if isinstance(document, dict) else {})]
        }
    if kind in ("code_execution_result", "bash_code_execution_result"):
        files = [f.get("file_id") for f in content.get("content") or [] if isinstance(f, dict)]
        return {
            "code_output": CodeOutput(
                stdout=str(content.get("stdout") or ""),
                stderr=str(content.get("stderr") or ""),
                exit_code=_int(content.get("return_code")),
                files=[f for f in files if isinstance(f, str)],
            )
        }
    return {}


def _fetched(content: dict[str, Any], document: dict[str, Any]) -> SearchResult:
    source = document.get("source")
    text = source.get("data") if isinstance(source, dict) and source.get("type") == "text" else None
    title = document.get("title")
    return SearchResult(
        url=str(content.get("url", "")),
        title=title if isinstance(title, str) else None,
        snippet=text if isinstance(text, str) else None,
    )


def _search_result(result: dict[str, Any]) -> SearchResult:
    return SearchResult(
        url=str(result.get("url", "")),
        title=_text(result.get("title")),
        page_age=_text(result.get("page_age")),
    )


def citation(raw: dict[str, Any]) -> Citation:
    """One of Anthropic's citation objects, canonical; the object itself kept raw."""
    kind = str(raw.get("type", ""))
    cited = _text(raw.get("cited_text"))
    if kind == "web_search_result_location":
        return Citation(
            kind="url", url=_text(raw.get("url")), title=_text(raw.get("title")),
            cited_text=cited, provider_raw=_raw(raw),
        )  # fmt: skip
    if kind == "search_result_location":
        where = DocumentLocation(
            index=_int(raw.get("search_result_index")),
            title=_text(raw.get("title")),
            unit="block",
            start=_int(raw.get("start_block_index")),
            end=_int(raw.get("end_block_index")),
        )
        return Citation(
            kind="search_result", url=_text(raw.get("source")), title=_text(raw.get("title")),
            cited_text=cited, document=where, provider_raw=_raw(raw),
        )  # fmt: skip
    unit = _UNIT.get(kind)
    suffix = _RANGE.get(unit or "", "")
    where = DocumentLocation(
        index=_int(raw.get("document_index")),
        title=_text(raw.get("document_title")),
        file_id=_text(raw.get("file_id")),
        unit=unit,
        start=_int(raw.get(f"start_{suffix}")) if unit else None,
        end=_int(raw.get(f"end_{suffix}")) if unit else None,
    )
    return Citation(kind="document", cited_text=cited, document=where, provider_raw=_raw(raw))


def _raw(data: dict[str, Any]) -> ProviderRaw:
    return ProviderRaw(provider="anthropic", data=data)  # the builder stamps who made it


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
