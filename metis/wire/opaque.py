"""Blocks with no canonical meaning (:class:`metis.model.OpaqueBlock`) on their way back: each
goes only to the provider that made it, as the item it gave; anywhere else it is left out with
one WARN naming its kind (docs/contract.md §8)."""

from __future__ import annotations

import copy
from typing import Any

from metis.errors import InvalidRequestError
from metis.model.content import Message, OpaqueBlock, Role
from metis.model.history import history_in
from metis.model.request import CanonicalRequest
from metis.wire.codec import EncodeContext

REPLY_ONLY = "reply_only"
"""The place of a block that goes back to no provider (a tool call the model made that is no
call to run: Gemini's ``UNEXPECTED_TOOL_CALL``)."""


def own_item(block: OpaqueBlock, provider: str) -> dict[str, Any] | None:
    """The block as ``provider`` gave it, when ``provider`` made it; else None."""
    raw = block.provider_raw
    item = raw.data.get("item")
    return item if raw.provider == provider and isinstance(item, dict) else None


def sent_back(
    block: OpaqueBlock, call: EncodeContext, message_id: str | None
) -> dict[str, Any] | None:
    """The block as this call's provider gave it, a copy to send (:func:`own_item`); None, with
    the one WARN, when another provider made it."""
    item = own_item(block, call.provider)
    if item is None or place_of(block) == REPLY_ONLY:
        why = elsewhere(block) if item is None else f"a {block.kind!r} kept only in the reply"
        call.warn_dropped(block.kind, why, message_id=message_id)
        return None
    return copy.deepcopy(item)


def place_of(block: OpaqueBlock) -> str | None:
    """Where in its provider's message the block goes back, when the reader said so."""
    place = block.provider_raw.data.get("place")
    return place if isinstance(place, str) else None


def merge_fragment(item: dict[str, Any], fragment: dict[str, Any]) -> None:
    """A streamed piece of an opaque block added to what came before, in place: text is
    appended, lists extended, objects merged key by key, anything else replaced (a Converse
    ``image`` delta's ``source.bytes`` pieces become the whole block's)."""
    for key, value in fragment.items():
        held = item.get(key)
        if isinstance(held, str) and isinstance(value, str):
            item[key] = held + value
        elif isinstance(held, list) and isinstance(value, list):
            held.extend(copy.deepcopy(value))
        elif isinstance(held, dict) and isinstance(value, dict):
            merge_fragment(held, value)
        else:
            item[key] = copy.deepcopy(value)


def elsewhere(block: OpaqueBlock) -> str:
    """Why the block is left out of a request to another provider."""
    return (
        f"a {block.kind!r} block from {block.provider_raw.provider} has no canonical form: "
        "it goes back only to the provider that made it"
    )


def without_foreign(request: CanonicalRequest, call: EncodeContext) -> CanonicalRequest:
    """``request`` without the opaque blocks another provider made, each reported once. A
    user message they were all of is refused: leaving it out would change what is asked (the
    last one gone, the model would go on from the assistant's turn before it)."""
    sent = request.messages
    if not any(
        _foreign(b, call.provider)
        for i in history_in(call, sent).opaque_at
        for b in sent[i].content
    ):
        return request
    messages: list[Message] = []
    for i, message in enumerate(request.messages):
        kept = []
        where = message.id or f"messages[{i}]"
        for block in message.content:
            if _foreign(block, call.provider):
                assert isinstance(block, OpaqueBlock)
                call.warn_dropped(block.kind, elsewhere(block), message_id=where)
            else:
                kept.append(block)
        if not kept and message.role is Role.USER:
            raise _nothing_left(message, where, call)
        messages.append(message.model_copy(update={"content": kept}))
    return request.model_copy(update={"messages": messages})


def _nothing_left(message: Message, where: str, call: EncodeContext) -> InvalidRequestError:
    kinds = ", ".join(sorted({repr(b.kind) for b in message.content if isinstance(b, OpaqueBlock)}))
    return InvalidRequestError(
        f"{where}: a user message has nothing {call.provider} can read: its content ({kinds}) "
        "has no canonical form and goes back only to the provider that made it",
        provider=call.provider,
        request_id=call.request_id,
        retryable=False,
    )


def _foreign(block: Any, provider: str) -> bool:
    return isinstance(block, OpaqueBlock) and block.provider_raw.provider != provider
