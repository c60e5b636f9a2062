"""Server-side tools in the emulator's replies: a web search with its results (and the answer
citing them) or code run in the provider's sandbox, written once and rendered by each format
as its provider sends them: Anthropic's ``server_tool_use`` and ``*_tool_result`` blocks with
``citations`` here, the other APIs' forms in ``formats/server_openai.py``, ``server_gemini.py``
and ``server_converse.py``::

    Emulator(model=[web_search("python 3.13", [("https://python.org", "Python")],
                               say="Python 3.13 is out.")])
    Emulator(model=[code_execution("print(6 * 7)", stdout="42\\n", say="It is 42.")])
    Emulator(model=[web_fetch("https://python.org", "Python 3.14 is out.", say="It is.")])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metis.errors import ConfigError
from metis.testing.emulator.model import Reply
from metis.testing.emulator.wire import signature

SEARCH_KIND = "anthropic-web-search"
"""What the emulator signs a search result's ``encrypted_content`` (and a citation's
``encrypted_index``) as: only what it issued is accepted back."""


@dataclass(slots=True)
class ServerOut:
    """One server tool's call and result: ``web_search`` (``query``, ``results`` as (url,
    title) pairs), ``code_execution`` (``code``, ``stdout``, ``stderr``, ``exit_code``) or
    ``web_fetch`` (``url``, the page's ``title`` and text, ``page``)."""

    name: str
    input: dict[str, Any]
    results: list[tuple[str, str]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    title: str = ""
    page: str = ""


def web_search(
    query: str, results: list[tuple[str, str]], say: str = "", cite: bool = True
) -> Reply:
    """A reply that searched the web for ``query`` and found ``results``, then says ``say``
    citing every result (``cite``)."""
    for n, found in enumerate(results):
        if not (isinstance(found, tuple) and len(found) == 2 and all(map(_is_str, found))):
            raise ConfigError(
                f"web_search(): result {n} is {found!r}; expected (url, title), as "
                "web_search('python', [('https://python.org', 'Python')])"
            )
    reply = Reply(text=say)
    reply.server = [ServerOut("web_search", {"query": query}, results=list(results))]
    reply.cite = cite
    return reply


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def code_execution(
    code: str, stdout: str = "", stderr: str = "", exit_code: int = 0, say: str = ""
) -> Reply:
    """A reply that ran ``code`` in the sandbox (its output as given), then says ``say``."""
    reply = Reply(text=say)
    reply.server = [
        ServerOut(
            "code_execution", {"code": code}, stdout=stdout, stderr=stderr, exit_code=exit_code
        )
    ]
    return reply


def web_fetch(url: str, page: str, title: str = "", say: str = "") -> Reply:
    """A reply that fetched ``url`` (its text ``page``, its ``title``), then says ``say``: an
    Anthropic ``web_fetch`` call and result, Gemini's ``urlContextMetadata`` (the APIs that
    fetch; no citations)."""
    reply = Reply(text=say)
    reply.server = [ServerOut("web_fetch", {"url": url}, title=title, page=page)]
    return reply


def anthropic_blocks(out: ServerOut, call_id: str) -> list[dict[str, Any]]:
    """The call and its result as Anthropic's blocks."""
    call = {"type": "server_tool_use", "id": call_id, "name": out.name, "input": out.input}
    result: dict[str, Any]
    if out.name == "web_search":
        found = [
            {"type": "web_search_result", "url": url, "title": title,
             "encrypted_content": signature(SEARCH_KIND, url), "page_age": None}
            for url, title in out.results
        ]  # fmt: skip
        result = {"type": "web_search_tool_result", "tool_use_id": call_id, "content": found}
    elif out.name == "web_fetch":
        document = {
            "type": "document",
            "title": out.title or None,
            "source": {"type": "text", "media_type": "text/plain", "data": out.page},
        }
        fetched = {"type": "web_fetch_result", "url": out.input["url"], "content": document,
                   "retrieved_at": "2026-01-01T00:00:00Z"}  # fmt: skip
        result = {"type": "web_fetch_tool_result", "tool_use_id": call_id, "content": fetched}
    else:
        ran = {"type": "code_execution_result", "stdout": out.stdout, "stderr": out.stderr,
               "return_code": out.exit_code, "content": []}  # fmt: skip
        result = {"type": "code_execution_tool_result", "tool_use_id": call_id, "content": ran}
    return [call, result]


def anthropic_citations(reply: Reply) -> list[dict[str, Any]]:
    """Citations of every search result, for the reply's text."""
    if not reply.cite:
        return []
    return [
        {"type": "web_search_result_location", "url": url, "title": title,
         "cited_text": title, "encrypted_index": signature(SEARCH_KIND, url)}
        for out in reply.server
        for url, title in out.results
    ]  # fmt: skip
