"""The Responses API's stored conversations, for ``previous_response_id``: in this process
(the oldest forgotten first past the configured number), or in Redis when the gateway names
one (each kept for ``stored_seconds``), so any gateway can continue any response.

A translated response is kept as canonical messages; a passed-through one as the Responses
items it was made of (its input and its output, as the provider wrote them) with the upstream
that keeps it too, when that upstream stored it (docs/gateway.md "Pass-through").

Beside either, the ``response`` object as its client first received it (whole, or a stream's
final state), which ``GET /v1/responses/{id}`` returns (metis.gateway.responses_kept).

Each response belongs to the gateway key that made it (its ``owner``: the key's name, or ""
for the simple key): another key asking for its id finds nothing, as for an id never made."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from metis.errors import ServerError
from metis.gateway.errors import shared_store_failed
from metis.model.content import Message

log = logging.getLogger("metis.gateway")

Owner = str
"""Whose responses: a gateway key's name, or "" for the simple key (``owner_of``)."""


def owner_of(key: Any) -> Owner:
    """The owner of the responses a request makes: its key's name (a ``KeyState``), "" for
    the simple key or a gateway without keys."""
    return "" if key is None else str(key.spec.name)


def whose(owner: Owner) -> str:
    """`` (key NAME)`` for a key of ``gateway.keys`` (nothing for the simple key, or none), so
    an operator reading a log line knows which client sent the request."""
    return f" (key {owner})" if owner else ""


@dataclass(frozen=True, slots=True)
class Stored:
    """A response's whole conversation: its input (after what it continued) and its reply.
    The instructions are not kept: the API does not carry them over. ``items``: the
    conversation as Responses items (a passed-through response; ``messages`` is then empty);
    ``upstream``: the upstream that stored it too, which may be sent its id; ``response``:
    the response object as its client received it (None: kept before the gateway kept it);
    ``ids``: a translated conversation's items' ids as its client knows them
    (metis.gateway.item_ids); ``holder``: the upstream that stored a passed-through
    conversation's items (``store``), whether or not it may be sent the response's id: it
    finds its server tool items by their ids."""

    messages: tuple[Message, ...]
    items: tuple[Any, ...] | None = None
    upstream: str | None = None
    response: dict[str, Any] | None = None
    ids: dict[str, str] | None = None
    holder: str | None = None


class _Keeping:
    """What both stores share: a translated response kept as its canonical messages."""

    async def keep(self, owner: Owner, response_id: str, stored: Stored) -> None:
        raise NotImplementedError

    async def put(
        self,
        owner: Owner,
        response_id: str,
        messages: list[Message],
        response: dict[str, Any] | None = None,
        ids: dict[str, str] | None = None,
    ) -> None:
        await self.keep(owner, response_id, Stored(tuple(messages), response=response, ids=ids))


class ResponseStore(_Keeping):
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[Owner, str], Stored] = OrderedDict()

    async def get(self, owner: Owner, response_id: str) -> Stored | None:
        return self._items.get((owner, response_id))

    async def keep(self, owner: Owner, response_id: str, stored: Stored) -> None:
        if self.capacity == 0:
            return
        self._items[owner, response_id] = stored
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    async def forget(self, owner: Owner, response_id: str) -> bool:
        """The response deleted; whether the owner had it."""
        return self._items.pop((owner, response_id), None) is not None


def _once(items: tuple[Any, ...], response: dict[str, Any] | None) -> dict[str, Any]:
    """A passed-through response's items and response object, its output (the items' last
    ones) written once: in the items, and its number as the response's ``output``."""
    output = response.get("output") if response is not None else None
    kept: dict[str, Any] = {"items": list(items), "response": response}
    last = items[len(items) - len(output) :] if isinstance(output, list) else None
    if response is not None and last is not None and list(last) == output:
        kept["response"] = {**response, "output": len(output)}
    return kept


def _stored(kept: Any) -> Stored:
    """What :meth:`RedisResponseStore.keep` wrote, read back (a value of another shape raises
    ValueError, TypeError, LookupError or AttributeError)."""
    if isinstance(kept, list):  # canonical messages, kept before the response was
        return Stored(tuple(Message.model_validate(m) for m in kept))
    response = kept.get("response")
    if response is not None and not (
        isinstance(response, dict) and isinstance(response.get("id"), str)
    ):
        raise TypeError(f"a response without its id: {type(response).__name__}")
    if "items" in kept:
        items = tuple(kept["items"])
        if not all(isinstance(item, dict) for item in items) or not _text(kept.get("upstream")):
            raise TypeError("items that are not objects, or an upstream that is not a name")
        count = response.get("output") if response is not None else None
        if response is not None and isinstance(count, int):  # the items' last ones
            response = {**response, "output": list(items[len(items) - count :])}
        return Stored((), items, kept.get("upstream"), response, holder=kept.get("holder"))
    messages = tuple(Message.model_validate(m) for m in kept["messages"])
    ids = kept.get("ids")
    if ids is not None and not (isinstance(ids, dict) and all(map(_text, ids.values()))):
        raise TypeError(f"item ids of type {type(ids).__name__}, not names")
    return Stored(messages, response=response, ids=ids)


def _text(value: Any) -> bool:
    """Whether ``value`` is a string (or None, for what may be missing)."""
    return value is None or isinstance(value, str)


class RedisResponseStore(_Keeping):
    def __init__(self, client: Any, seconds: int, prefix: str = "metis:gateway:responses:"):
        self.client, self.seconds, self.prefix = client, seconds, prefix

    def _key(self, owner: Owner, response_id: str) -> str:
        # the owner as a digest: a fixed length, so no name and id can spell another's pair
        return f"{self.prefix}{hashlib.sha256(owner.encode()).hexdigest()[:32]}:{response_id}"

    async def get(self, owner: Owner, response_id: str) -> Stored | None:
        try:
            found = await self.client.get(self._key(owner, response_id))
        except Exception as exc:
            raise shared_store_failed(f"read the stored response {response_id!r}", exc) from exc
        if found is None:
            return None
        try:
            return _stored(json.loads(found))
        except (ValueError, TypeError, LookupError, AttributeError) as exc:
            log.error(
                "gateway stored response %s is not a value a gateway wrote (%s: %.200s)",
                response_id,
                type(exc).__name__,
                exc,
                extra={"event": "metis.gateway.store_failed"},
            )
            raise ServerError(
                f"the stored response {response_id!r} could not be read: the gateway's shared "
                "store holds a value no gateway wrote there",
                retryable=False,
            ) from None

    async def keep(self, owner: Owner, response_id: str, stored: Stored) -> None:
        kept: dict[str, Any] = {"response": stored.response}
        if stored.items is not None:
            kept.update(_once(stored.items, stored.response), upstream=stored.upstream)
            kept["holder"] = stored.holder
        else:
            kept["messages"] = [
                m.model_dump(mode="json", exclude_none=True) for m in stored.messages
            ]
            if stored.ids:
                kept["ids"] = stored.ids
        data = json.dumps(kept, separators=(",", ":"), ensure_ascii=False)
        try:
            await self.client.set(self._key(owner, response_id), data, ex=self.seconds)
        except Exception:  # the answer is the caller's still; only a later continuation fails
            log.exception(
                "gateway could not keep response %s: a previous_response_id naming it will "
                "not be found",
                response_id,
                extra={"event": "metis.gateway.store_failed"},
            )

    async def forget(self, owner: Owner, response_id: str) -> bool:
        """The response deleted; whether the owner had it."""
        try:
            return bool(await self.client.delete([self._key(owner, response_id)]))
        except Exception as exc:
            raise shared_store_failed(f"delete the stored response {response_id!r}", exc) from exc
