"""The Responses API's state the gateway serves from its own store (metis.gateway.store):
the conversation a ``previous_response_id`` continues, each translated response kept for the
next, and the reasoning items a client sends back by their id alone (docs/gateway.md)."""

from __future__ import annotations

from typing import Any, Protocol

from metis.gateway.errors import PreviousResponseNotFoundError
from metis.gateway.inbound import Inbound
from metis.gateway.item_ids import GivenIds, answered_ids
from metis.gateway.reasoning_items import encrypted, reasoning_place, with_text
from metis.gateway.store import Owner, RedisResponseStore, ResponseStore, Stored
from metis.model.content import Message, RedactedThinkingBlock, Role, ThinkingBlock

Store = ResponseStore | RedisResponseStore
Thought = ThinkingBlock | RedactedThinkingBlock


async def continued(store: Store, body: Any, owner: Owner) -> tuple[Any, Stored | None]:
    """A Responses request with the response it continues: the stored messages to put
    before its own; or, for a passed-through response (kept as items), the body with those
    items before its input, read as one (a tool call and its output then share one
    canonical id)."""
    previous = body.get("previous_response_id") if isinstance(body, dict) else None
    if not isinstance(previous, str):
        return body, None
    stored = await store.get(owner, previous)
    if stored is None:
        raise PreviousResponseNotFoundError(f"Previous response with id '{previous}' not found.")
    given = body.get("input")
    if stored.items is None or not isinstance(given, (str, list)):
        return body, stored
    own = [{"role": "user", "content": given}] if isinstance(given, str) else given
    return {**body, "input": [*stored.items, *own]}, None


class Asked(Protocol):
    """What keeping a translated response needs of its request (metis.gateway.service's
    ``Prepared``): the request read, its key, and its items' ids known before the answer."""

    inbound: Inbound
    owner: Owner
    ids: GivenIds | None


async def remember(store: Store, asked: Asked, reply: Message, response: dict[str, Any]) -> None:
    """A translated response kept (unless its request said ``store: false``) as the
    conversation it ends, with the ``response`` object its client received and its items'
    ids as its client knows them."""
    inbound, given = asked.inbound, asked.ids
    if inbound.options.get("store", True):
        history = [m for m in inbound.messages if m.role is not Role.SYSTEM]
        ids = answered_ids(*given, response) if given is not None else None
        await store.put(asked.owner, response["id"], [*history, reply], response, ids)


async def recalled(store: Store, body: Any, owner: Owner) -> tuple[Any, bool]:
    """``body`` with each reasoning item it sends back by its id alone (no encrypted content)
    given the thinking it names, from the response the gateway kept, as the encrypted content
    that item would have carried with its text in it (its maker written in: it goes back to
    that model only);
    and whether any was. An id the gateway gave out for no kept response (another key's, one
    forgotten, a provider's own) stays as it came: left out and reported, as before."""
    items = body.get("input") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return body, False
    thoughts: dict[str, list[Thought]] = {}
    out, changed = list(items), False
    for i, item in enumerate(items):
        place = _named(item)
        if place is None:
            continue
        response_id, index = place
        if response_id not in thoughts:
            thoughts[response_id] = await _thoughts(store, owner, response_id)
        found = thoughts[response_id]
        sealed = _sealed(found[index]) if index < len(found) else ""
        if sealed:
            out[i], changed = {**item, "encrypted_content": sealed}, True
    return ({**body, "input": out}, True) if changed else (body, False)


def _sealed(thought: Thought) -> str:
    """A kept block as its item's encrypted content, its text in it (the item sent back may
    have had no summary written)."""
    return with_text(getattr(thought, "thinking", ""), encrypted(thought, thought.provider_raw))


def _named(item: Any) -> tuple[str, int] | None:
    """The response and place a reasoning item sent by its id alone names."""
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    if item.get("encrypted_content") not in (None, "") or not isinstance(item.get("id"), str):
        return None
    return reasoning_place(item["id"])


async def _thoughts(store: Store, owner: Owner, response_id: str) -> list[Thought]:
    """The thinking blocks of a kept translated response's reply, in order."""
    stored = await store.get(owner, response_id)
    if stored is None or not stored.messages:
        return []
    reply = stored.messages[-1]
    return [block for block in reply.content if isinstance(block, Thought)]
