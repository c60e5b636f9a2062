"""Gemini's built-in tools and grounding (docs/contract.md §11, §12), beside the schema codec.

Declared as ``tools[{googleSearch: {excludeDomains?}}, {urlContext: {}}, {codeExecution: {}}]``.
Code execution answers with model parts ``executableCode{language, code, id?}`` and
``codeExecutionResult{outcome, output, id?}``; with ``includeServerSideToolInvocations`` (Gemini
API) a search or URL fetch shows as ``toolCall{id, toolType, args}`` and ``toolResponse{id,
toolType, response}`` parts. Each becomes a server tool's call or result keeping its part (and
any ``thoughtSignature`` on it) to go back verbatim to the model that made it. A candidate's
``groundingMetadata`` (usually on the last chunk) and ``citationMetadata`` become citations
(:mod:`metis.wire.schema.gemini_grounding`); the grounding's ``webSearchQueries`` count as web
searches in the usage as Google bills them: one a query from Gemini 3, one a grounded reply
before (Gemini's pricing page). Its ``urlContextMetadata`` (the URL context tool's, output only)
becomes a ``web_fetch`` call and result per ``urlMetadata`` entry (the result's page, or the
retrieval status as its ``error``; an entry naming no URL keeps its status, with no URL),
unless the reply showed the fetches as ``toolCall`` parts already. Gemini takes no part for
them back (nor does its own SDK send the metadata again), so to Gemini they go as nothing;
elsewhere as their text projection. Sources: python-genai ``types.py`` (``GoogleSearch``,
``UrlContext``, ``ToolCodeExecution``, ``ExecutableCode``, ``CodeExecutionResult``, ``Outcome``,
``ToolCall``, ``ToolResponse``, ``UrlContextMetadata``, ``UrlMetadata``, ``UrlRetrievalStatus``).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from functools import partial
from typing import Any

from metis.errors import CapabilityError
from metis.model.content import ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.response import ServerToolRequests
from metis.model.server_tools import (
    CODE_EXECUTION,
    WEB_FETCH,
    WEB_SEARCH,
    CodeExecution,
    CodeOutput,
    ProviderTool,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebFetch,
    WebSearch,
    goes_only_to,
)
from metis.wire.builder import MessageBuilder
from metis.wire.codec import EncodeContext
from metis.wire.read import malformed
from metis.wire.schema.gemini_grounding import citations, recited

_TOOL_TYPES = {"GOOGLE_SEARCH_WEB": WEB_SEARCH, "URL_CONTEXT": WEB_FETCH}
_OK = "OUTCOME_OK"
_URL_READ = "URL_RETRIEVAL_STATUS_SUCCESS"
_COMBINES = re.compile(r"^gemini-(?:[3-9]|[1-9][0-9])")  # the wire models that mix tools
_SHOWN = "includeServerSideToolInvocations"
_PLACE = ("uri", "startIndex", "endIndex", "title", "license")  # one recited source


def declarations(request: CanonicalRequest, call: EncodeContext) -> list[dict[str, Any]]:
    """The request's server tools as Gemini ``tools`` entries."""
    out: list[dict[str, Any]] = []
    for tool in request.server_tools:
        if isinstance(tool, WebSearch):
            if tool.max_uses or tool.allowed_domains or tool.user_location or tool.context_size:
                _refuse(call, "Gemini's Google Search takes only blocked_domains")
            search = {"excludeDomains": list(tool.blocked_domains)} if tool.blocked_domains else {}
            out.append({"googleSearch": search})
        elif isinstance(tool, WebFetch):
            if tool != WebFetch():
                _refuse(call, "Gemini's URL context takes no options")
            out.append({"urlContext": {}})
        elif isinstance(tool, CodeExecution):
            if tool.container is not None:
                _refuse(call, "Gemini's code execution takes no container")
            out.append({"codeExecution": {}})
        elif isinstance(tool, ProviderTool) and tool.dialect == "gemini":
            out.append({tool.type: dict(tool.options)})
        else:
            _refuse(call, goes_only_to(tool))
    return out


def add_declarations(body: dict[str, Any], request: CanonicalRequest, call: EncodeContext) -> None:
    """The request's server tools added to ``body``'s ``tools``. Beside function tools only from
    Gemini 3 on, which then must be asked to show its own calls (``toolConfig
    .includeServerSideToolInvocations``: ai.google.dev/gemini-api/docs/tool-combination; the
    Vertex stack leaves the field out, which Vertex does not take); before, a CapabilityError."""
    tools = body.get("tools") or []
    if any(isinstance(t, dict) and "functionDeclarations" in t for t in tools):
        if not _COMBINES.search(call.wire_model):
            _refuse(call, "Gemini takes built-in tools beside function tools from Gemini 3 on")
        config = body.get("toolConfig")
        body["toolConfig"] = {**(config if isinstance(config, dict) else {}), _SHOWN: True}
    body["tools"] = [*tools, *declarations(request, call)]


def _refuse(call: EncodeContext, reason: str) -> None:
    raise CapabilityError(
        f"{call.model} cannot serve this request: {reason}",
        provider=call.provider,
        request_id=call.request_id,
    )


READ_APART = frozenset({"groundingMetadata", "urlContextMetadata", "citationMetadata"})
"""The keys of a candidate that :meth:`GeminiParts.seen` reads."""


def _candidate_index(candidate: dict[str, Any]) -> int:
    index = candidate.get("index", 0)
    return index if index.__class__ is int else 0


_BILLED_PER_PROMPT = re.compile(r"gemini-[12](?![0-9])")
"""The models whose grounding with Search Google bills per grounded prompt, not per query."""


class GeminiParts:
    """Reads one reply's server-tool parts and grounding, for the schema parser."""

    def __init__(self) -> None:
        self._calls = 0
        self._last_call: str | None = None
        self._names: dict[str, str] = {}
        self._grounding: dict[str, Any] | None = None
        self._url_context: dict[str, Any] | None = None
        self._recited: dict[tuple[str, ...], dict[str, Any]] = {}  # citationMetadata's sources
        self.index: int | None = None
        """The index of the candidate read, once a chunk had one."""

    def candidate(self, obj: dict[str, Any], where: str) -> dict[str, Any]:
        """``obj`` with the candidate read as its only one, chosen by its ``index`` (0 when
        it has none, as on Vertex) and not by its position: the lowest index of the first
        response or chunk with candidates, then that index in every chunk after it (a chunk
        without it reads as one without candidates)."""
        candidates = obj.get("candidates")
        if candidates.__class__ is not list:
            if candidates is None:
                return obj
            raise malformed(f"{where}.candidates", "a list", candidates)
        only = candidates[0] if len(candidates) == 1 else None
        if only.__class__ is dict and self.index in (None, index := _candidate_index(only)):
            self.index = index  # the usual chunk: its one candidate, the one read
            return obj
        for at, each in enumerate(candidates):
            if each.__class__ is not dict:
                raise malformed(f"{where}.candidates[{at}]", "an object", each)
        if not candidates:
            return obj
        if self.index is None:
            self.index = min(map(_candidate_index, candidates))
        chosen = [c for c in candidates if _candidate_index(c) == self.index][:1]
        return {**obj, "candidates": chosen}

    def part(self, part: dict[str, Any], builder: MessageBuilder) -> int | None:
        """The canonical index of the block ``part`` made, or None when it is not a server
        tool's part."""
        block: ServerToolCallBlock | ServerToolResultBlock
        raw = ProviderRaw(provider="gemini", data={"part": part})
        if isinstance(code := part.get("executableCode"), dict):
            block = self._call(code.get("id"), CODE_EXECUTION, _code_input(code), raw)
        elif isinstance(ran := part.get("codeExecutionResult"), dict):
            block = _code_result(ran, self._answered(ran.get("id")), raw)
        elif isinstance(used := part.get("toolCall"), dict):
            name = _TOOL_TYPES.get(str(used.get("toolType")), str(used.get("toolType")).lower())
            args = used.get("args")
            block = self._call(used.get("id"), name, args if isinstance(args, dict) else {}, raw)
        elif isinstance(answer := part.get("toolResponse"), dict):
            call_id = self._answered(answer.get("id"))
            block = ServerToolResultBlock(
                tool_call_id=call_id, name=self._names.get(call_id, "tool"), provider_raw=raw
            )
        else:
            return None
        key: Hashable = ("server", self._calls, block.type)
        builder.server_tool(key, block)
        index = builder.index_of(key)
        assert index is not None
        return index

    def seen(self, obj: dict[str, Any]) -> None:
        """A response or chunk: its grounding metadata, if any, replaces what came before."""
        candidates = obj.get("candidates")
        if candidates.__class__ is not list or not candidates:
            return
        first = candidates[0]
        if first.__class__ is not dict or first.keys().isdisjoint(READ_APART):
            return  # the usual chunk: one lookup
        if isinstance(grounding := first.get("groundingMetadata"), dict):
            self._grounding = grounding
        if isinstance(url_context := first.get("urlContextMetadata"), dict) and url_context:
            self._url_context = url_context
        recited = first.get("citationMetadata")  # Vertex's citations, the API's citationSources
        for source in _list(recited, "citations") or _list(recited, "citationSources"):
            if isinstance(source, dict):
                place = tuple(str(source.get(key)) for key in _PLACE)
                self._recited.setdefault(place, source)

    def finish(self, builder: MessageBuilder, text_key: Hashable) -> None:
        """The grounding's citations, on the reply's text, and its searches, in the usage;
        the URLs read, as fetches."""
        if self._grounding is not None:
            if searches := len(_list(self._grounding, "webSearchQueries")):
                billed = 1 if _BILLED_PER_PROMPT.search(builder.model) else searches
                builder.usage(server_tools=ServerToolRequests(web_search=billed))
            text = builder.text_of(text_key)
            for cited in citations(self._grounding, text, partial(_unread, builder)):
                builder.citation(text_key, cited)
        for source in self._recited.values():
            builder.citation(text_key, recited(source))
        if self._url_context is not None and WEB_FETCH not in self._names.values():
            for number, entry in enumerate(_list(self._url_context, "urlMetadata"), 1):
                if isinstance(entry, dict):
                    for block in url_fetch(entry, f"url_context_{number}"):
                        builder.server_tool(("url_context", number, block.type), block)
                else:
                    _unread(builder, repr(entry), "urlMetadata")

    def _call(
        self, given_id: Any, name: str, input_: dict[str, Any], raw: ProviderRaw
    ) -> ServerToolCallBlock:
        self._calls += 1
        call_id = given_id if isinstance(given_id, str) and given_id else f"server_{self._calls}"
        self._last_call = call_id
        self._names[call_id] = name
        return ServerToolCallBlock(id=call_id, name=name, input=input_, provider_raw=raw)

    def _answered(self, given_id: Any) -> str:
        """The call a result answers: by its id, else the latest call."""
        self._calls += 1
        if isinstance(given_id, str) and given_id:
            return given_id
        return self._last_call or f"server_{self._calls}"


def _unread(builder: MessageBuilder, what: str, kind: str = "groundingChunks") -> None:
    builder.warn(
        kind, f"gemini {kind} entry {what} has no canonical form", message_id=builder.message_id
    )


def url_fetch(
    entry: dict[str, Any], call_id: str
) -> tuple[ServerToolCallBlock, ServerToolResultBlock]:
    """A ``urlMetadata`` entry as the fetch it reports: its call and its result (with no URL
    where the entry names none: its status is still what became of the fetch)."""
    url, status = entry.get("retrievedUrl"), entry.get("urlRetrievalStatus")
    url = url if isinstance(url, str) else None
    raw = ProviderRaw(provider="gemini", data={"urlMetadata": entry})
    given = {"url": url} if url is not None else {}
    call = ServerToolCallBlock(id=call_id, name=WEB_FETCH, input=given, provider_raw=raw)
    read = status == _URL_READ
    result = ServerToolResultBlock(
        tool_call_id=call_id,
        name=WEB_FETCH,
        search_results=[SearchResult(url=url)] if read and url is not None else None,
        error=None if read else str(status or "URL_RETRIEVAL_STATUS_UNSPECIFIED"),
        provider_raw=raw,
    )
    return call, result


def _code_input(code: dict[str, Any]) -> dict[str, Any]:
    return {k: code[k] for k in ("language", "code") if isinstance(code.get(k), str)}


def _code_result(ran: dict[str, Any], call_id: str, raw: ProviderRaw) -> ServerToolResultBlock:
    outcome = ran.get("outcome")
    output = ran.get("output") if isinstance(ran.get("output"), str) else ""
    assert isinstance(output, str)
    ok = outcome == _OK
    code = CodeOutput(stdout=output if ok else "", stderr="" if ok else output)
    error = None if ok else str(outcome)
    return ServerToolResultBlock(
        tool_call_id=call_id, name=CODE_EXECUTION, code_output=code, error=error, provider_raw=raw
    )


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []
