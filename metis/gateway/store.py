"""The Responses API's stored conversations, for ``previous_response_id``: in this process
(the oldest forgotten first past the configured number), or in Redis when the gateway names
one (each kept for ``stored_seconds``), so any gateway can continue any response.

A translated response is kept as canonical messages; a passed-through one as the Responses
items it was made of (its input and its output, as the provider wrote them) with the upstream
that keeps it too, when that upstream stored it (docs/gateway.md "Pass-through")."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from metis.model.content import Message


@dataclass(frozen=True, slots=True)
class Stored:
    """A response's whole conversation: its input (after what it continued) and its reply.
    The instructions are not kept: the API does not carry them over. ``items``: the
    conversation as Responses items (a passed-through response; ``messages`` is then empty);
    ``upstream``: the upstream that stored it too, which may be sent its id."""

    messages: tuple[Message, ...]
    items: tuple[Any, ...] | None = None
    upstream: str | None = None


class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, Stored] = OrderedDict()

    async def get(self, response_id: str) -> Stored | None:
        return self._items.get(response_id)

    async def put(self, response_id: str, messages: list[Message]) -> None:
        await self.keep(response_id, Stored(tuple(messages)))

    async def keep(self, response_id: str, stored: Stored) -> None:
        if self.capacity == 0:
            return
        self._items[response_id] = stored
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)


class RedisResponseStore:
    def __init__(self, client: Any, seconds: int, prefix: str = "metis:gateway:responses:"):
        self.client, self.seconds, self.prefix = client, seconds, prefix

    async def get(self, response_id: str) -> Stored | None:
        found = await self.client.get(self.prefix + response_id)
        if found is None:
            return None
        kept = json.loads(found)
        if isinstance(kept, dict):  # Responses items
            return Stored((), tuple(kept["items"]), kept.get("upstream"))
        return Stored(tuple(Message.model_validate(m) for m in kept))

    async def put(self, response_id: str, messages: list[Message]) -> None:
        await self.keep(response_id, Stored(tuple(messages)))

    async def keep(self, response_id: str, stored: Stored) -> None:
        if stored.items is not None:
            data = json.dumps({"items": list(stored.items), "upstream": stored.upstream})
        else:
            kept = [m.model_dump(mode="json", exclude_none=True) for m in stored.messages]
            data = json.dumps(kept)
        await self.client.set(self.prefix + response_id, data, ex=self.seconds)
