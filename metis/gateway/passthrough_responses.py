"""A passed-through Responses request's conversation (docs/gateway.md "Pass-through"):
``previous_response_id`` is served from the gateway's own store, as on the translated path.

The request goes on as it came, the id with it, only when the response it names was made by
this very upstream and kept there (passed through to it with ``store`` on, by a stack that
keeps responses: its ``continuation`` stage and its codec's ``store``). Any other (a
translated response, another upstream's, one its upstream did not keep) the upstream never
saw: the gateway sends the conversation it stored in its place, as input items before the
request's own, and the answer names the caller's ``previous_response_id`` again. An id the
gateway does not hold is the translated path's 404.

Each answer is kept (unless the request says ``store: false``) as the Responses items it was
made of, with its upstream when that upstream kept it too."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from metis.adapter.adapter import Adapter
from metis.gateway.errors import PreviousResponseNotFoundError
from metis.gateway.item_ids import named_items
from metis.gateway.reasoning_items import reasoning_place
from metis.gateway.relay_responses import ResponsesRelay
from metis.gateway.server_written import RESPONSES_MARKS, as_text
from metis.gateway.store import Owner, RedisResponseStore, ResponseStore, Stored
from metis.model.server_tools import projected_text
from metis.wire.openai_responses.encode import input_items
from metis.wire.openai_responses.server_tools import server_blocks

UNHELD = "this upstream does not hold it: what it did goes as text"
KEEPS_RESPONSES = "continuation"
"""The stage of a stack whose upstream keeps its responses (open_responses has none)."""


@dataclass(slots=True)
class Conversation:
    """What the gateway keeps of a passed-through Responses request: the items before its
    answer, the upstream, whether the upstream keeps the answer, and the id the caller gave
    when the gateway sent the conversation in its place."""

    before: list[Any]
    upstream: str
    upstream_keeps: bool
    keep: bool
    owner: Owner = ""
    """The key the conversation belongs to (metis.gateway.store)."""
    previous: str | None = None
    upstream_stores: bool = False
    """Whether the upstream stores the answer's items (``store``), which it then finds by
    their ids, though it may not be sent the response's id (no ``continuation`` stage)."""


def upstream_of(adapter: Adapter) -> str:
    """The upstream an id was made by, the same in every gateway of one configuration: the
    address the adapter sends to and the account its key opens (a digest: no key is kept)."""
    endpoint = adapter.endpoint
    account = f"{endpoint.base_url}{endpoint.path} {endpoint.api_key or ''}"
    return f"{adapter.name}:{hashlib.sha256(account.encode()).hexdigest()[:32]}"


def _stores(adapter: Adapter) -> bool:
    """Whether the stack lets its upstream keep responses (its codec's ``store``)."""
    provider = adapter.pipeline.provider
    return provider is not None and getattr(provider.codec, "store", False) is True


async def converse(
    body: dict[str, Any],
    adapter: Adapter,
    stored: ResponseStore | RedisResponseStore,
    reported: list[str],
    owner: Owner,
) -> Conversation:
    """The conversation of ``body`` (changed in place where the gateway sends the
    conversation for the id); what the gateway leaves out of a stored one, in ``reported``."""
    keep = body.get("store") is not False
    if keep and not _stores(adapter):  # the deployment keeps no conversation upstream
        body["store"] = False
        reported.append("store (this model's stack keeps no responses with the provider)")
    upstream_keeps = keep and _stores(adapter) and KEEPS_RESPONSES in adapter.pipeline
    if body.get("background") is True:  # a queued response's result would never come back
        del body["background"]
        reported.append("background (the gateway answers when the response is done)")
    _unheld(body, reported)
    given = body.get("input")
    own = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
    conversation = Conversation(own, upstream_of(adapter), upstream_keeps, keep, owner)
    conversation.upstream_stores = keep and _stores(adapter)
    previous = body.get("previous_response_id")
    if previous is None:
        return conversation
    found = await stored.get(owner, previous)
    if found is None:
        raise PreviousResponseNotFoundError(f"Previous response with id '{previous}' not found.")
    if found.upstream == conversation.upstream and found.items is not None:
        conversation.before = [*found.items, *own]
        return conversation
    holds = found.holder is not None and found.holder == conversation.upstream
    before = _items(found, reported, holds)
    body["input"] = conversation.before = [*before, *own]
    del body["previous_response_id"]
    conversation.previous = previous
    return conversation


def _unheld(body: dict[str, Any], reported: list[str]) -> None:
    """Reasoning items sent back by an id the gateway gave out (another model's thinking, as
    ``rs_<response>_<n>``) with no encrypted content, which the gateway could not give back
    from a response it kept (``store: false``): left out and named, as the translated path
    leaves them. The upstream never saw the id and refuses the request ("Item with id ...
    not found"): the OpenAI Agents SDK with ``store=False`` handing a run over from Claude to
    gpt-5 sends Claude's items so."""
    items = body.get("input")
    if not isinstance(items, list):
        return
    kept = []
    for i, item in enumerate(items):
        if (
            isinstance(item, dict)
            and item.get("type") == "reasoning"
            and not item.get("encrypted_content")
            and isinstance(item.get("id"), str)
            and reasoning_place(item["id"]) is not None
        ):
            reported.append(f"input[{i}] (reasoning)")
        else:
            kept.append(item)
    if len(kept) < len(items):
        body["input"] = kept


def _items(found: Stored, reported: list[str], holds: bool) -> list[Any]:
    """A stored conversation as input items for an upstream that has not seen them: no
    item ids (another upstream's are unknown here), no reasoning (signed for another), server
    calls and results as text. A passed-through conversation's server tool items go whole,
    with their ids, where the upstream ``holds`` them (it stored them, and refuses one without
    its id); elsewhere as text (it would look the id up in vain), named in ``reported``."""
    if found.items is None:

        def drop(block_type: str, reason: str, message_id: str) -> None:
            reported.append(f"{block_type} of previous_response_id ({reason})")

        return input_items(as_text(list(found.messages), reported), "gateway", drop)
    items = []
    for item in found.items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "reasoning":
            reported.append("a reasoning item of previous_response_id (another upstream's)")
            continue
        if kind in RESPONSES_MARKS and not holds:
            reported.append(f"a {kind} item of previous_response_id ({UNHELD})")
            items.extend(_as_text(item))
            continue
        if isinstance(item, dict) and kind not in RESPONSES_MARKS:
            item = {k: v for k, v in item.items() if k != "id"}
        items.append(item)
    return items


def _as_text(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A server tool item as an assistant message saying what it did (none when it says
    nothing readable)."""
    call, result = server_blocks(item)
    said = projected_text(result, call)
    return [] if said is None else [{"role": "assistant", "content": said}]


async def remember(
    conversation: Conversation, relay: ResponsesRelay, stored: ResponseStore | RedisResponseStore
) -> None:
    """The answer kept in the gateway's store, for a later ``previous_response_id``."""
    if not conversation.keep or relay.response_id is None or relay.output is None:
        return
    items = (*conversation.before, *relay.output)
    upstream = conversation.upstream if conversation.upstream_keeps else None
    holder = conversation.upstream if conversation.upstream_stores else None
    named = named_items(items, relay.response_id)
    kept = Stored((), named, upstream, relay.final, holder=holder)
    await stored.keep(conversation.owner, relay.response_id, kept)
