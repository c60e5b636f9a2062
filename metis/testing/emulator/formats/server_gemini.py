"""Server tools in Gemini's (and Vertex's) replies (:mod:`..server_tools` writes them once).

Code execution answers with model parts, ``executableCode{language, code}`` then
``codeExecutionResult{outcome, output}``, each in a chunk of its own when streamed. A Google
Search grounds the answer: the candidate carries ``groundingMetadata`` (on the last chunk
when streamed) with the queries, a ``searchEntryPoint``, one ``groundingChunks[].web`` per
page (its ``uri`` a ``vertexaisearch.cloud.google.com`` redirect, its ``title`` the page's
domain) and ``groundingSupports`` tying the text's segment (UTF-8 offsets; ``startIndex`` left
out when 0, as proto3 JSON leaves defaults out) to the chunks it rests on. Search results
themselves are not parts. Sources: python-genai ``types.py`` (``ExecutableCode``,
``CodeExecutionResult``, ``Outcome``, ``GroundingMetadata``, ``GroundingChunkWeb``,
``GroundingSupport``, ``Segment``, ``SearchEntryPoint``);
https://ai.google.dev/gemini-api/docs/google-search.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from metis.testing.emulator.formats.server_openai import cited
from metis.testing.emulator.model import Reply
from metis.testing.emulator.wire import Ids

REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"
SERVER_PARTS = ("executableCode", "codeExecutionResult")
URL_READ = "URL_RETRIEVAL_STATUS_SUCCESS"


def code_parts(reply: Reply) -> list[dict[str, Any]]:
    """Each code run of the reply as its two parts."""
    parts: list[dict[str, Any]] = []
    for out in reply.server:
        if out.name != "code_execution":
            continue
        outcome = "OUTCOME_OK" if out.exit_code == 0 else "OUTCOME_FAILED"
        parts.append({"executableCode": {"language": "PYTHON", "code": out.input.get("code", "")}})
        parts.append(
            {"codeExecutionResult": {"outcome": outcome, "output": out.stdout + out.stderr}}
        )
    return parts


def grounding(reply: Reply, ids: Ids) -> dict[str, Any] | None:
    """The candidate's ``groundingMetadata`` for the reply's searches, or None."""
    queries = [out.input.get("query", "") for out in reply.server if out.name == "web_search"]
    if not queries:
        return None
    pages = cited(reply) or [found for out in reply.server for found in out.results]
    chunks = [
        {"web": {"uri": REDIRECT + ids.token(40, "alnum"), "title": _domain(url)}}
        for url, _ in pages
    ]
    metadata: dict[str, Any] = {
        "webSearchQueries": queries,
        "searchEntryPoint": {"renderedContent": '<div class="container">…</div>\n'},
        "groundingChunks": chunks,
    }
    if cited(reply):
        segment = {"endIndex": len(reply.text.encode()), "text": reply.text}
        support = {"segment": segment, "groundingChunkIndices": list(range(len(chunks)))}
        metadata["groundingSupports"] = [support]
    return metadata


def url_context(reply: Reply) -> dict[str, Any] | None:
    """The candidate's ``urlContextMetadata`` for the reply's fetches, or None."""
    fetched = [
        {"retrievedUrl": out.input.get("url", ""), "urlRetrievalStatus": URL_READ}
        for out in reply.server
        if out.name == "web_fetch"
    ]
    return {"urlMetadata": fetched} if fetched else None


def _domain(url: str) -> str:
    host = urlsplit(url).hostname or url
    return host.removeprefix("www.")
