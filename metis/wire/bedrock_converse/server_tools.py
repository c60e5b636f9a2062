"""Amazon Nova 2's system tools on Converse, and Converse citations (docs/contract.md §11, §12).

Declared as ``toolConfig.tools[{systemTool: {name}}]``: ``nova_grounding`` (web search) and
``nova_code_interpreter``; Nova 2 models only. AWS runs them inside the turn: the reply's
assistant message holds ``toolUse{..., type: "server_tool_use"}`` and then ``toolResult{...,
type: "nova_code_interpreter_result"}`` (its text a JSON object of ``stdOut``, ``stdErr``,
``exitCode``, ``isError``); both go back, verbatim, in the assistant turn. Grounded text comes
as ``citationsContent`` (streamed: ``citation`` deltas). Sources: botocore
``bedrock-runtime/2023-09-30/service-2.json`` (``SystemTool``, ``ToolUseBlock.type``,
``ToolResultBlockStart``, ``CitationsContentBlock``, ``CitationLocation``);
https://docs.aws.amazon.com/nova/latest/nova2-userguide/web-grounding.html.
"""

from __future__ import annotations

from typing import Any

from metis.model.citation import Citation, DocumentLocation
from metis.model.content import ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.server_tools import (
    CODE_EXECUTION,
    WEB_SEARCH,
    CodeExecution,
    CodeOutput,
    ProviderTool,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebSearch,
    goes_only_to,
)
from metis.wire import json_limits
from metis.wire.codec import EncodeContext, refuse_request

SYSTEM_TOOLS = {WEB_SEARCH: "nova_grounding", CODE_EXECUTION: "nova_code_interpreter"}
_CANONICAL = {wire: name for name, wire in SYSTEM_TOOLS.items()}
_DOCUMENT_UNITS = {"documentChar": "char", "documentPage": "page", "documentChunk": "block"}


def declarations(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
    out = []
    for tool in request.server_tools:
        if isinstance(tool, ProviderTool):
            if tool.dialect != "bedrock_converse":
                refuse_request(call, goes_only_to(tool))
            named = {"name": tool.name} if tool.name is not None else {}
            out.append({tool.type: {**named, **tool.options}})
            continue
        if "nova-2" not in call.wire_model:
            refuse_request(call, f"on Bedrock only Nova 2 models run a {tool.kind} tool")
        if not isinstance(tool, WebSearch | CodeExecution) or tool != type(tool)():
            refuse_request(call, f"Nova's {tool.kind} tool takes no options")
        out.append({"systemTool": {"name": SYSTEM_TOOLS[tool.kind]}})
    return out


def is_server_call(tool_use: dict[str, Any]) -> bool:
    return tool_use.get("type") == "server_tool_use"


def call_block(tool_use: dict[str, Any], input_: dict[str, Any]) -> ServerToolCallBlock:
    name = str(tool_use.get("name", ""))
    raw = {"toolUse": {**tool_use, "input": input_}}
    return ServerToolCallBlock(
        id=str(tool_use.get("toolUseId", "")),
        name=_CANONICAL.get(name, name),
        input=input_,
        provider_raw=ProviderRaw(provider="bedrock_converse", data=raw),
    )


def result_block(result: dict[str, Any], names: dict[str, str]) -> ServerToolResultBlock:
    """A ``toolResult`` answering a server call (``names``: call id -> canonical name)."""
    tool_call_id = str(result.get("toolUseId", ""))
    name = names.get(tool_call_id, str(result.get("type", "")))
    fields: dict[str, Any] = {}
    if result.get("status") == "error":
        fields["error"] = "error"
    if result.get("type") == "nova_code_interpreter_result":
        fields["code_output"] = _code_output(result.get("content"))
    return ServerToolResultBlock(
        tool_call_id=tool_call_id,
        name=name,
        provider_raw=ProviderRaw(provider="bedrock_converse", data={"toolResult": result}),
        **fields,
    )


def _code_output(content: Any) -> CodeOutput | None:
    texts = [p.get("text") for p in content or [] if isinstance(p, dict)]
    jsons = [p.get("json") for p in content or [] if isinstance(p, dict) and "json" in p]
    for found in [*jsons, *texts]:
        try:
            data = json_limits.loads(found) if isinstance(found, str) else found
        except ValueError:  # not JSON, or past the limits (never a RecursionError)
            continue
        if isinstance(data, dict):
            code = data.get("exitCode")
            return CodeOutput(
                stdout=str(data.get("stdOut") or ""),
                stderr=str(data.get("stdErr") or ""),
                exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            )
    return None


def citation(raw: dict[str, Any]) -> Citation:
    """A Converse ``Citation``: a web page, a place in a document of the request, or content
    blocks of one of its search results (``searchResultLocation``, named by ``source``)."""
    location = raw.get("location") if isinstance(raw.get("location"), dict) else {}
    assert isinstance(location, dict)
    quoted = [p.get("text") for p in raw.get("sourceContent") or [] if isinstance(p, dict)]
    cited = "".join(t for t in quoted if isinstance(t, str)) or None
    title = raw.get("title") if isinstance(raw.get("title"), str) else None
    origin = ProviderRaw(provider="bedrock_converse", data=raw)
    web = location.get("web")
    if isinstance(web, dict):
        url = web.get("url") if isinstance(web.get("url"), str) else None
        return Citation(kind="url", url=url, title=title, cited_text=cited, provider_raw=origin)
    found = location.get("searchResultLocation")
    if isinstance(found, dict):
        place = DocumentLocation(
            index=_int(found.get("searchResultIndex")),
            title=title,
            unit="block",
            start=_int(found.get("start")),
            end=_int(found.get("end")),
        )
        source = raw.get("source") if isinstance(raw.get("source"), str) else None
        return Citation(
            kind="search_result", url=source, title=title, cited_text=cited, document=place,
            provider_raw=origin,
        )  # fmt: skip
    for key, unit in _DOCUMENT_UNITS.items():
        where = location.get(key)
        if isinstance(where, dict):
            place = DocumentLocation(
                index=_int(where.get("documentIndex")),
                title=title,
                unit=unit,
                start=_int(where.get("start")),
                end=_int(where.get("end")),
            )
            return Citation(kind="document", cited_text=cited, document=place, provider_raw=origin)
    return Citation(kind="document", title=title, cited_text=cited, provider_raw=origin)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
