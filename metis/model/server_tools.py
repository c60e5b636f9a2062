"""Tools the provider runs itself: their declarations, and their calls and results in a reply
(docs/contract.md §11).

Declared in ``CanonicalRequest.server_tools``::

    WebSearch(max_uses=3, allowed_domains=["python.org"])
    WebFetch(max_uses=2)
    CodeExecution()
    ProviderTool(dialect="anthropic", type="bash_20250124", name="bash")

A reply that used one holds a :class:`ServerToolCallBlock` and its
:class:`ServerToolResultBlock`: the provider already ran the call, so the application runs
nothing (``run_tools`` passes over them) and sends no result. ``provider_raw`` keeps the
provider's own blocks (encrypted contents and ids included): they go back verbatim only to the
provider and model that made them; anywhere else the result goes as a text projection
(:func:`projected_text`) and a call alone is left out with the lossy-projection WARN.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from metis.core.empty import empty_dict, empty_list
from metis.core.suggest import did_you_mean
from metis.model.base import Canonical
from metis.model.block import BlockBase

WEB_SEARCH, WEB_FETCH, CODE_EXECUTION = "web_search", "web_fetch", "code_execution"


class _Declaration(Canonical):
    """A server tool's declaration, or a part of one."""


class UserLocation(_Declaration):
    """Roughly where the user is, so searches favour local results."""

    city: str | None = None
    region: str | None = None
    country: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """ISO 3166-1 alpha-2 code (``GB``)."""
    timezone: str | None = None
    """IANA name (``Europe/London``)."""


class _DomainFilter(_Declaration):
    max_uses: int | None = Field(default=None, ge=1)
    allowed_domains: list[str] = Field(default_factory=empty_list)
    blocked_domains: list[str] = Field(default_factory=empty_list)

    @model_validator(mode="after")
    def _one_filter(self) -> _DomainFilter:
        if self.allowed_domains and self.blocked_domains:
            raise ValueError("give allowed_domains or blocked_domains, not both")
        return self


class WebSearch(_DomainFilter):
    """Search the web: at most ``max_uses`` searches in a reply, within ``allowed_domains`` or
    outside ``blocked_domains``, near ``user_location``; ``context_size`` is how much of what
    it finds the model sees (OpenAI's ``search_context_size``)."""

    kind: Literal["web_search"] = "web_search"
    user_location: UserLocation | None = None
    context_size: Literal["low", "medium", "high"] | None = None


class WebFetch(_DomainFilter):
    """Read the pages at URLs the conversation names (Anthropic ``web_fetch``, Gemini
    ``urlContext``); ``citations`` asks for citations of what was read."""

    kind: Literal["web_fetch"] = "web_fetch"
    citations: bool = False
    max_content_tokens: int | None = Field(default=None, ge=1)


class CodeExecution(_Declaration):
    """Run code in the provider's sandbox; ``container`` reuses one the provider made before
    (Anthropic's and OpenAI's container ids)."""

    kind: Literal["code_execution"] = "code_execution"
    container: str | None = None


class ProviderTool(_Declaration):
    """Any other tool a provider defines (Anthropic's bash or text editor, OpenAI's file search
    or computer use, ...), in the provider's own terms: sent as ``{"type": type, "name": name,
    **options}`` only to stacks of wire dialect ``dialect`` (``anthropic``,
    ``openai_responses``, ``gemini``, ``bedrock_converse``...); elsewhere a CapabilityError."""

    kind: Literal["provider"] = "provider"
    dialect: str = Field(min_length=1)
    type: str = Field(min_length=1)
    name: str | None = None
    options: dict[str, Any] = Field(default_factory=empty_dict)


DIALECTS = ("anthropic", "bedrock_converse", "gemini", "openai_chat", "openai_responses")
"""The wire dialects whose encoders send a :class:`ProviderTool` (a codec of your own may read
it under another name)."""


def goes_only_to(tool: ProviderTool) -> str:
    """Why a stack of another dialect refuses ``tool``: it goes only to its own; a dialect that
    is a misspelt one of :data:`DIALECTS` says which was meant."""
    said = f"the {tool.dialect} tool {tool.type!r} goes only to {tool.dialect}"
    return said if tool.dialect in DIALECTS else said + did_you_mean(tool.dialect, DIALECTS)


ServerToolLike = WebSearch | WebFetch | CodeExecution | ProviderTool
"""A tool the provider runs itself (a plain union: ``isinstance`` takes it)."""
ServerTool = Annotated[ServerToolLike, Field(discriminator="kind")]


# In replies ------------------------------------------------------------------------------


class SearchResult(Canonical):
    """A page a web search found."""

    url: str
    title: str | None = None
    snippet: str | None = None
    page_age: str | None = None


class CodeOutput(Canonical):
    """What code run by the provider printed, how it exited, and the files it made (provider
    file ids or URLs)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    files: list[str] = Field(default_factory=empty_list)


class ServerToolCallBlock(BlockBase):
    """A call the provider made and ran itself: the provider's ``id`` (never a canonical
    ``tu_`` id), the tool's ``name`` (``web_search``, ``web_fetch``, ``code_execution``, or the
    provider's own) and its ``input``."""

    type: Literal["server_tool_call"] = "server_tool_call"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=empty_dict)


class ServerToolResultBlock(BlockBase):
    """What a server tool call returned: ``search_results`` of a search, ``code_output`` of
    code, ``error`` (the provider's code) when it failed; anything else only in
    ``provider_raw``."""

    type: Literal["server_tool_result"] = "server_tool_result"
    tool_call_id: str
    name: str
    search_results: list[SearchResult] | None = None
    code_output: CodeOutput | None = None
    error: str | None = None


def projected_text(
    result: ServerToolResultBlock, call: ServerToolCallBlock | None = None
) -> str | None:
    """The result as text for a provider that cannot take it as such, saying what was called
    and what it returned; None when the result holds nothing readable (its payload is opaque
    or encrypted)."""
    head = f"[{result.name}"
    if call is not None and call.input:
        head += " " + json.dumps(call.input, ensure_ascii=False, sort_keys=True)
    head += "]"
    if result.error is not None:
        return f"{head} failed: {result.error}"
    if result.search_results is not None:
        lines = [head, *(_search_line(r) for r in result.search_results)]
        return "\n".join(lines)
    if result.code_output is not None:
        return _code_text(head, result.code_output)
    return None


def _search_line(result: SearchResult) -> str:
    line = f"- {result.title} <{result.url}>" if result.title else f"- <{result.url}>"
    return f"{line}: {result.snippet}" if result.snippet else line


def _code_text(head: str, output: CodeOutput) -> str:
    lines = [head]
    if output.exit_code is not None:
        lines.append(f"exit code {output.exit_code}")
    if output.stdout:
        lines.append(f"stdout:\n{output.stdout}")
    if output.stderr:
        lines.append(f"stderr:\n{output.stderr}")
    lines.extend(f"file: {name}" for name in output.files)
    return "\n".join(lines)
