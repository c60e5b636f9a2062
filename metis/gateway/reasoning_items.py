"""The Responses API's reasoning items carrying a model's thinking through a client, as OpenAI's
carry theirs: ``encrypted_content`` when the request's ``include`` asks for
``reasoning.encrypted_content`` (a client that keeps no state on the server, as Codex CLI
and the OpenAI Agents SDK with ``store: false``), read back into the thinking block it was.

The encrypted content is the block's signature (or redacted thinking's data) with its maker
written in (:mod:`metis.gateway.provenance`), so the block goes back to the model that made
it, and to no other.

A client that keeps its conversation on the server (``store: true``, the openai SDK's and the
Agents SDK's default) sends an item back by its ``id`` alone: each item's id names the response
it is part of and its place among that response's thinking (:func:`reasoning_id`), so the
gateway finds the block in the response it kept (:mod:`metis.gateway.conversations`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.provenance import carried_thinking, unsigned, with_thinking, wrap
from metis.model.block import ProviderRaw
from metis.model.content import RedactedThinkingBlock, ThinkingBlock

ENCRYPTED = "reasoning.encrypted_content"
REDACTED = "redacted_thinking:"
"""Before the data of redacted thinking, which has no text: a reasoning item with no summary
may be either."""


def reasoning_id(response_id: str, index: int) -> str:
    """The id of the ``index``-th reasoning item of the response ``response_id``."""
    return f"rs_{response_id.removeprefix('resp_')}_{index}"


def reasoning_place(item_id: str) -> tuple[str, int] | None:
    """The response and the place of a reasoning item :func:`reasoning_id` named; None for
    another id."""
    head, underscore, index = item_id.removeprefix("rs_").rpartition("_")
    if not item_id.startswith("rs_") or not underscore or not head:
        return None
    if not index.isdecimal() or len(index) > 6:
        return None
    return f"resp_{head}", int(index)


def asks_encrypted(raw: Any, ignored: list[str]) -> bool:
    """Whether ``include`` asks for the reasoning's encrypted content; what else it asks for
    is named in ``ignored`` (the gateway serves none of it)."""
    if raw is None:
        return False
    if not isinstance(raw, list) or not all(isinstance(value, str) for value in raw):
        raise InvalidRequestError("include: expected a list of strings")
    ignored.extend(f"include ({value[:60]})" for value in raw if value != ENCRYPTED)
    return ENCRYPTED in raw


def encrypted(block: ThinkingBlock | RedactedThinkingBlock, made_by: ProviderRaw | None) -> str:
    """A block's ``encrypted_content``: for thinking its maker gave no signature (Gemini's),
    its maker alone, so it goes back to that model only ("" when the maker is not known)."""
    if isinstance(block, RedactedThinkingBlock):
        return REDACTED + wrap(made_by, block.data)
    return wrap(made_by, block.signature) if block.signature else unsigned(made_by)


def with_text(thinking: str, sealed: str) -> str:
    """``sealed`` (an item's encrypted content) carrying ``thinking`` too, for an item written
    without its summary (the request asked for none): the model that signed the thinking
    needs its text back with the signature."""
    if sealed.startswith(REDACTED):
        return sealed
    return with_thinking(sealed, thinking)


def read_reasoning(
    item: Mapping[str, Any], where: str
) -> ThinkingBlock | RedactedThinkingBlock | None:
    """A reasoning item as the block it was; None for one with no encrypted content, which
    no model can be given back."""
    content = item.get("encrypted_content")
    if content is None or content == "":
        return None
    if not isinstance(content, str):
        raise InvalidRequestError(f"{where}.encrypted_content: expected a string")
    if content.startswith(REDACTED):
        return RedactedThinkingBlock(data=content[len(REDACTED) :])
    summary = item.get("summary")
    parts = summary if isinstance(summary, list) else []
    texts = [part["text"] for part in parts if isinstance(part, Mapping) and "text" in part]
    if not all(isinstance(text, str) for text in texts):
        raise InvalidRequestError(f"{where}.summary: expected summary_text parts")
    carried = carried_thinking(content)
    thinking = "\n\n".join(texts) if carried is None else carried
    return ThinkingBlock(thinking=thinking, signature=content)
