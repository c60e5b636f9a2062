"""Web search and citations on Chat Completions (docs/contract.md §11, §12).

OpenAI's search models (``gpt-4o-search-preview``, ``gpt-5-search-api``, ...) search when the
body has ``web_search_options`` (``search_context_size``, ``user_location``) and cite in
``message.annotations`` (``url_citation`` with character offsets; streamed in a delta).
Perplexity always searches; the same ``web_search_options`` and ``search_domain_filter`` shape
it, and the reply lists its sources in top-level ``citations`` (URLs; the ``[n]`` markers in
the text count from 1 into it) and ``search_results`` (title, URL, date); xAI's Chat replies
carry ``citations`` the same way. Sources: openai-python ``chat/completion_create_params.py``
(``WebSearchOptions``), ``chat/chat_completion_message.py`` (``Annotation``);
https://docs.perplexity.ai/guides/search-domain-filters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metis.core.suggest import did_you_mean
from metis.model.citation import Citation, TextSpan
from metis.model.content import ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.server_tools import DIALECTS, ProviderTool, ServerToolLike, WebSearch
from metis.wire.builder import MessageBuilder
from metis.wire.codec import EncodeContext, refuse_request


def search_fields(request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
    """The body fields that ask for the request's web search (and any ``openai_chat`` tool of
    the provider's own, under ``tools``)."""
    out: dict[str, Any] = {}
    for tool in request.server_tools:
        if isinstance(tool, WebSearch):
            out.update(_perplexity(tool, call) if _perplexity_stack(call) else _openai(tool, call))
        elif isinstance(tool, ProviderTool) and tool.dialect == "openai_chat":
            named = {"name": tool.name} if tool.name is not None else {}
            out.setdefault("tools", []).append({"type": tool.type, **named, **tool.options})
        else:
            what = (
                f"the {tool.dialect} tool {tool.type!r}"
                if isinstance(tool, ProviderTool)
                else (f"a {tool.kind} tool")
            )
            refuse_request(call, f"Chat Completions takes no {what}{_meant(tool)}")
    return out


def _perplexity_stack(call: EncodeContext) -> bool:
    return call.provider == "perplexity"


def _openai(tool: WebSearch, call: EncodeContext) -> dict[str, Any]:
    if "search" not in call.wire_model:
        meant = (  # OpenAI's own: its Responses API runs the tool with this model
            f" (gpt-4o-search-preview, ...); on the Responses API this one does: "
            f"openai_responses:{call.wire_model}"
            if call.provider == "openai"
            else ""
        )
        refuse_request(call, f"on Chat Completions only the search models search the web{meant}")
    if tool.max_uses is not None or tool.allowed_domains or tool.blocked_domains:
        refuse_request(call, "Chat Completions web search takes no max_uses and no domain filters")
    options: dict[str, Any] = {}
    if tool.context_size is not None:
        options["search_context_size"] = tool.context_size
    if tool.user_location is not None:
        where = tool.user_location.model_dump(exclude_none=True)
        options["user_location"] = {"type": "approximate", "approximate": where}
    return {"web_search_options": options}


def _perplexity(tool: WebSearch, call: EncodeContext) -> dict[str, Any]:
    if tool.max_uses is not None:
        refuse_request(call, "Perplexity web search takes no max_uses")
    out: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if tool.context_size is not None:
        options["search_context_size"] = tool.context_size
    if tool.user_location is not None and tool.user_location.country is not None:
        options["user_location"] = {"country": tool.user_location.country}
    if options:
        out["web_search_options"] = options
    domains = tool.allowed_domains or [f"-{d}" for d in tool.blocked_domains]
    if domains:
        out["search_domain_filter"] = domains
    return out


# Reading ---------------------------------------------------------------------------------


def annotation_citations(
    annotations: Any, unread: Callable[[str], None] | None = None
) -> list[Citation]:
    """``message.annotations`` (or a delta's) as citations; ``unread`` is told the type of
    each annotation that is no URL citation (none has a canonical form)."""
    out = []
    for annotation in annotations if isinstance(annotations, list) else []:
        cited = annotation.get("url_citation") if isinstance(annotation, dict) else None
        if not isinstance(cited, dict) or annotation.get("type") != "url_citation":
            if unread is not None:
                kind = annotation.get("type") if isinstance(annotation, dict) else None
                unread(str(kind) if kind is not None else repr(annotation))
            continue
        start, end = cited.get("start_index"), cited.get("end_index")
        span = None
        if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
            span = TextSpan(start=start, end=end)
        out.append(
            Citation(
                kind="url",
                url=_text(cited.get("url")),
                title=_text(cited.get("title")),
                span=span,
                provider_raw=ProviderRaw(provider="openai_chat", data=annotation),
            )
        )
    return out


def unread(builder: MessageBuilder, kind: str) -> None:
    """An annotation of ``kind`` left out of the reply, said (docs/contract.md §12)."""
    builder.warn(
        "annotation", f"openai_chat annotation {kind} has no canonical form",
        message_id=builder.message_id,
    )  # fmt: skip


def source_list(body: dict[str, Any]) -> list[Citation]:
    """A reply's top-level ``citations`` (Perplexity, xAI), titled from ``search_results``
    where it names the same URL; one citation per source, in the reply's order."""
    urls = body.get("citations")
    if not isinstance(urls, list):
        return []
    results = body.get("search_results")
    titles = {
        r.get("url"): r.get("title")
        for r in (results if isinstance(results, list) else [])
        if isinstance(r, dict)
    }
    return [
        Citation(
            kind="url",
            url=url,
            title=_text(titles.get(url)),
            provider_raw=ProviderRaw(provider="openai_chat", data={"citation_index": i + 1}),
        )
        for i, url in enumerate(urls)
        if isinstance(url, str)
    ]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _meant(tool: ServerToolLike) -> str:
    """The dialect a misspelt ``ProviderTool.dialect`` meant (``openai_chat`` among them)."""
    if not isinstance(tool, ProviderTool) or tool.dialect in DIALECTS:
        return ""
    return did_you_mean(tool.dialect, DIALECTS)
