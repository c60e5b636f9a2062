"""Server tools, citations, opaque blocks and custom calls in stored histories, both ways
(docs/contract.md §8, §10, §11, §12).

Imported, a block keeps its format's provenance (``anthropic``; ``openai`` for Chat) so that it
goes back as it came to the same format. Exported, each block goes as metis sends it to that
provider (:mod:`metis.wire.server_replay`, :mod:`metis.wire.opaque`): its own form where the
format made it; elsewhere a server tool's result as text and its call left out, an opaque block
or a citation the format cannot carry left out, each with the lossy-projection WARN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.adapter.sendable import first_unsendable
from metis.errors import InvalidRequestError
from metis.histories.reading import dropped
from metis.model.citation import Citation
from metis.model.content import ContentBlock, OpaqueBlock, ProviderRaw, TextBlock
from metis.wire.anthropic.server_tools import call_block, citation, result_block
from metis.wire.opaque import own_item
from metis.wire.openai_chat.read import CONTENT
from metis.wire.server_replay import for_provider

ANTHROPIC, CHAT = "anthropic", "openai"
CHAT_CITATIONS = "openai_chat"  # who the Chat reader says made an annotation
"""The provider each format's blocks are marked as made by."""


class Export:
    """What :func:`metis.wire.server_replay.for_provider` asks of a call, for a format: blocks
    made by its provider are its own; what it cannot carry is reported with the WARN."""

    request_id = "history"

    def __init__(self, provider: str, fmt: str) -> None:
        self.provider = self.model = self.wire_model = provider
        self.fmt = fmt

    def produced(self, origin: ProviderRaw | None) -> bool:
        return origin is not None and origin.provider == self.provider

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        dropped(block_type, message_id or "messages", self.fmt, reason)

    def own(self, content: list[ContentBlock], where: str) -> list[ContentBlock]:
        """``content`` with other providers' server-tool blocks projected or left out."""
        return for_provider(content, self, where)

    def opaque(self, block: OpaqueBlock, where: str) -> dict[str, Any] | None:
        """The block as this format stored it; None, with the WARN, if another made it."""
        item = own_item(block, self.provider)
        if item is None:
            origin = block.provider_raw.provider
            dropped(block.kind, where, self.fmt, f"{block.kind} of {origin} goes only there")
        return item


def opaque(
    kind: Any,
    item: Mapping[str, Any],
    provider: str,
    model: str | None = None,
    place: str | None = None,
) -> OpaqueBlock:
    """A stored block no canonical block holds, kept whole."""
    data: dict[str, Any] = {"item": dict(item)}
    if place is not None:
        data["place"] = place
    name = kind if isinstance(kind, str) and kind else "unknown"
    return OpaqueBlock(
        kind=name, provider_raw=ProviderRaw(provider=provider, model=model, data=data)
    )


# Anthropic Messages -----------------------------------------------------------------------


def stored(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A block to keep as stored: one JSON carries, or an InvalidRequestError naming where."""
    item = dict(block)
    problem = first_unsendable(item, where)
    if problem:
        raise InvalidRequestError(problem)
    return item


def from_anthropic_block(
    block: Mapping[str, Any], kind: Any, where: str, servers: dict[str, str], model: str | None
) -> ContentBlock | None:
    """A server tool's call or result, or any other block kept whole. ``servers``: the names
    of the server calls read so far, by id (a result names its call by id only); None, with
    the WARN, for a block whose type is not text."""
    if not named(kind, where, "Anthropic Messages import"):
        return None
    block = stored(block, where)
    made_by = ProviderRaw(provider=ANTHROPIC, model=model, data=dict(block))
    tool_id = block.get("tool_use_id")
    if (
        kind == "server_tool_use"
        and isinstance(block.get("id"), str)
        and isinstance(block.get("name"), str)
    ):
        given = block.get("input")
        call = call_block(dict(block), dict(given) if isinstance(given, Mapping) else {})
        servers[call.id] = call.name
        return call.model_copy(update={"provider_raw": made_by})
    if isinstance(kind, str) and kind.endswith("_tool_result") and isinstance(tool_id, str):
        name = servers.get(tool_id, kind.removesuffix("_tool_result"))
        return result_block(dict(block), name).model_copy(update={"provider_raw": made_by})
    return opaque(kind, block, ANTHROPIC, model)


def anthropic_citations(block: Mapping[str, Any], where: str) -> list[Citation] | None:
    cited = block.get("citations")
    if not isinstance(cited, list) or not cited:
        return None
    return [citation(stored(c, f"{where}.citations")) for c in cited if isinstance(c, Mapping)]


def to_anthropic_text(block: TextBlock, where: str) -> dict[str, Any]:
    """A text block, with the citations Anthropic made (others are left out, with the WARN:
    an Anthropic citation holds locations only Anthropic issues)."""
    out: dict[str, Any] = {"type": "text", "text": block.text}
    kept = []
    for cited in block.citations or []:
        raw = cited.provider_raw
        if raw is not None and raw.provider == ANTHROPIC and raw.data:
            kept.append(dict(raw.data))
        else:
            dropped(
                "citation",
                where,
                "Anthropic Messages export",
                "Anthropic takes back only its own citations",
            )
    if kept:
        out["citations"] = kept
    return out


# OpenAI Chat --------------------------------------------------------------------------------


def chat_annotations(texts: list[TextBlock], where: str) -> list[dict[str, Any]]:
    """The citations of an assistant message's text blocks as Chat ``url_citation``
    annotations, their spans counted in the message's joined text; a citation with no URL or
    span (a document's) is left out with the WARN."""
    out: list[dict[str, Any]] = []
    offset = 0
    for block in texts:
        for cited in block.citations or []:
            raw = cited.provider_raw
            if offset == 0 and raw is not None and raw.provider == CHAT_CITATIONS and raw.data:
                out.append(dict(raw.data))  # as the reply gave it
            elif cited.url and cited.span is not None:
                start, end = offset + cited.span.start, offset + cited.span.end
                spot = {"start_index": start, "end_index": end, "url": cited.url}
                out.append({"type": "url_citation", "url_citation": {**spot, "title": cited.title}})
            else:
                why = "Chat cites only URLs at spans of the text"
                dropped("citation", where, "OpenAI Chat export", why)
        offset += len(block.text)
    return out


def chat_opaque_part(part: Mapping[str, Any], kind: Any, where: str) -> OpaqueBlock | None:
    """A content part of a type metis does not read, kept whole; None, with the WARN, for a
    part whose type is not text."""
    if not named(kind, where, "OpenAI Chat import"):
        return None
    return opaque(kind, stored(part, where), CHAT, place=CONTENT)


def named(kind: Any, where: str, fmt: str) -> bool:
    """Whether a stored block's ``type`` can name an opaque block (else the WARN says so)."""
    if isinstance(kind, str) and kind and first_unsendable(kind, where) is None:
        return True
    dropped(kind, where, fmt)
    return False
