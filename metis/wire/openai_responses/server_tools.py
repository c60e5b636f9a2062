"""OpenAI Responses' built-in tools and annotations (docs/contract.md §11, §12).

Declared as ``web_search`` (``filters.allowed_domains``, ``search_context_size``,
``user_location``) and ``code_interpreter`` (``container``); a reply holds one output item per
call, ``web_search_call`` (its ``action``, and the pages it read when
``web_search_call.action.sources`` is included) or ``code_interpreter_call`` (its ``code`` and,
with ``code_interpreter_call.outputs`` included, the logs and images it made), which becomes a
call block and a result block; the item goes back whole, once, from the call block. Text
parts carry ``annotations`` (``url_citation``, ``file_citation``, ``container_file_citation``,
``file_path``). Sources: openai-python ``responses/web_search_tool_param.py``,
``responses/tool_param.py`` (``CodeInterpreter``), ``responses/response_function_web_search.py``,
``responses/response_code_interpreter_tool_call.py``, ``responses/response_output_text.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metis.model.citation import Citation, DocumentLocation, TextSpan
from metis.model.content import ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.response import ServerToolRequests
from metis.model.server_tools import (
    CODE_EXECUTION,
    WEB_SEARCH,
    CodeExecution,
    CodeOutput,
    ProviderTool,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebSearch,
    goes_only_to,
)
from metis.wire.builder import MessageBuilder
from metis.wire.codec import EncodeContext, refuse_request
from metis.wire.openai_responses import xai_tools as xai
from metis.wire.read import list_value, object_value, token_count

SERVER_ITEMS = {
    "web_search_call": WEB_SEARCH,
    "code_interpreter_call": CODE_EXECUTION,
    **xai.SERVER_CALL_ITEMS,
}
INCLUDES = {
    "web_search_call": "web_search_call.action.sources",
    "code_interpreter_call": "code_interpreter_call.outputs",
}


def declarations(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
    """The request's server tools as Responses tool entries."""
    return [_declared(tool, call) for tool in request.server_tools]


def includes(request: CanonicalRequest) -> list[str]:
    """What the body's ``include`` must ask for so the calls' results come back."""
    out = []
    if any(isinstance(t, WebSearch) for t in request.server_tools):
        out.append(INCLUDES["web_search_call"])
    if any(isinstance(t, CodeExecution) for t in request.server_tools):
        out.append(INCLUDES["code_interpreter_call"])
    return out


def _declared(tool: Any, call: EncodeContext) -> dict[str, Any]:
    if isinstance(tool, WebSearch):
        if tool.max_uses is not None or tool.blocked_domains:
            refuse_request(call, "OpenAI web search takes no max_uses and no blocked_domains")
        entry: dict[str, Any] = {"type": "web_search"}
        if tool.allowed_domains:
            entry["filters"] = {"allowed_domains": list(tool.allowed_domains)}
        if tool.context_size is not None:
            entry["search_context_size"] = tool.context_size
        if tool.user_location is not None:
            where = tool.user_location.model_dump(exclude_none=True)
            entry["user_location"] = {"type": "approximate", **where}
        return entry
    if isinstance(tool, CodeExecution):
        return {"type": "code_interpreter", "container": tool.container or {"type": "auto"}}
    if isinstance(tool, ProviderTool):
        if tool.dialect != "openai_responses":
            refuse_request(call, goes_only_to(tool))
        named = {"name": tool.name} if tool.name is not None else {}
        return {"type": tool.type, **named, **tool.options}
    refuse_request(call, f"OpenAI Responses has no {tool.kind} tool")
    raise AssertionError  # unreachable: _refuse raises


# Reading ---------------------------------------------------------------------------------


def server_blocks(item: dict[str, Any]) -> tuple[ServerToolCallBlock, ServerToolResultBlock]:
    """A finished server tool call item (``web_search_call``, ``code_interpreter_call``, or
    one of xAI's: :mod:`.xai_tools`) as its call and its result; the call keeps the whole item
    to send back."""
    kind = str(item.get("type"))
    name = xai.call_name(item, SERVER_ITEMS.get(kind, kind))
    item_id = str(item.get("id") or "")
    status = item.get("status")
    error = str(status) if status in ("failed", "incomplete") else None
    fields: dict[str, Any] = {}
    if kind == "web_search_call" and "arguments" not in item:
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        assert isinstance(action, dict)
        call_input = {k: v for k, v in action.items() if k != "sources"}
        sources = action.get("sources") or []
        found = [_source(s) for s in sources if isinstance(s, dict) and s.get("url")]
        fields["search_results"] = found
    elif kind == "code_interpreter_call" and "arguments" not in item:
        call_input = {"code": item.get("code") or "", "container_id": item.get("container_id")}
        fields["code_output"] = _code_output(item.get("outputs"))
    else:  # xAI's: the arguments as JSON text, nothing of what the tool returned
        call_input = xai.call_arguments(item)
    call = ServerToolCallBlock(
        id=item_id, name=name, input=call_input, provider_raw=_raw({"id": item_id, "item": item})
    )
    result = ServerToolResultBlock(
        tool_call_id=item_id, name=name, error=error, provider_raw=_raw({"id": item_id}), **fields
    )
    return call, result


def add_server_blocks(builder: MessageBuilder, index: int, item: dict[str, Any]) -> bool:
    """The finished item at ``index`` as its call and result blocks; True (it is done)."""
    call, result = server_blocks(item)
    builder.server_tool((index, "call"), call)
    builder.server_tool((index, "result"), result)
    return True


def part_citations(
    part: dict[str, Any], offset: int, where: str, builder: MessageBuilder
) -> list[Citation]:
    """An ``output_text`` part's annotations as citations (``offset``: where the part starts
    in the block's text); one of a kind that cites nothing is said to ``builder``."""
    found = []
    for annotation in list_value(part.get("annotations") or [], f"{where}.annotations"):
        annotation = object_value(annotation, f"{where}.annotations[]")
        cited = citation(annotation, offset)
        if cited is None:
            unread(builder, annotation)
        else:
            found.append(cited)
    return found


def unread(builder: MessageBuilder, annotation: dict[str, Any]) -> None:
    """An annotation of a kind that cites nothing, left out of the reply: said."""
    builder.warn(
        "annotation",
        f"openai_responses annotation {annotation.get('type')!r} has no canonical form",
        message_id=builder.message_id,
    )


def _source(source: dict[str, Any]) -> SearchResult:
    title = source.get("title")
    return SearchResult(url=str(source["url"]), title=title if isinstance(title, str) else None)


def _code_output(outputs: Any) -> CodeOutput | None:
    if not isinstance(outputs, list):
        return None  # not included: the call ran, its output is not known
    logs = [o.get("logs") for o in outputs if isinstance(o, dict) and o.get("type") == "logs"]
    images = [o.get("url") for o in outputs if isinstance(o, dict) and o.get("type") == "image"]
    return CodeOutput(
        stdout="".join(text for text in logs if isinstance(text, str)),
        files=[url for url in images if isinstance(url, str)],
    )


def citation(annotation: dict[str, Any], offset: int = 0) -> Citation | None:
    """An output text annotation as a citation (``offset``: where its part starts in the
    block's text); None for a kind that cites nothing."""
    kind = annotation.get("type")
    raw = _raw(annotation)
    span = _span(annotation, offset)
    if kind == "url_citation":
        return Citation(
            kind="url", url=_text(annotation.get("url")), title=_text(annotation.get("title")),
            span=span, provider_raw=raw,
        )  # fmt: skip
    if kind in ("file_citation", "container_file_citation", "file_path"):
        where = DocumentLocation(
            file_id=_text(annotation.get("file_id")), title=_text(annotation.get("filename"))
        )
        return Citation(kind="file", span=span, document=where, provider_raw=raw)
    return None


def _span(annotation: dict[str, Any], offset: int) -> TextSpan | None:
    start, end = annotation.get("start_index"), annotation.get("end_index")
    if end is None:
        start = end = annotation.get("index")  # file citations point at one place
    if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
        return TextSpan(start=start + offset, end=end + offset)
    return None


def _raw(data: dict[str, Any]) -> ProviderRaw:
    return ProviderRaw(provider="openai_responses", data=data)  # the builder stamps who


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_BILLED_CALLS = {"web_search_call": "web_search", "file_search_call": "file_search"}


def requests_made(
    item_types: Iterable[str], tool_usage: Any = None, provider: str = "openai_responses"
) -> ServerToolRequests | None:
    """The web and file searches made by a response's output items, given by type (OpenAI
    bills each call); None when it made none. The web searches the response's ``tool_usage``
    says it billed win (``web_search.num_requests``, openai-python ``ToolUsageWebSearch``: a
    ``web_search_call`` that opened a page or found in it is not billed)."""
    counts: dict[str, int] = {}
    for item_type in item_types:
        kind = _BILLED_CALLS.get(item_type)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    web = object_value(tool_usage or {}, "response.tool_usage").get("web_search")
    billed = object_value(web or {}, "response.tool_usage.web_search").get("num_requests")
    if billed is not None:
        counts[WEB_SEARCH] = token_count(billed, "tool_usage.web_search.num_requests", provider)
    return ServerToolRequests(**counts) if counts else None
