"""The Responses API's stored conversations, for ``previous_response_id``: in this process
(the oldest forgotten first past the configured number), or in Redis when the gateway names
one (each kept for ``stored_seconds``), so any gateway can continue any response."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from metis.model.content import Message


@dataclass(frozen=True, slots=True)
class Stored:
    """A response's whole conversation: its input (after what it continued) and its reply.
    The instructions are not kept: the API does not carry them over."""

    messages: tuple[Message, ...]


class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, Stored] = OrderedDict()

    async def get(self, response_id: str) -> Stored | None:
        return self._items.get(response_id)

    async def put(self, response_id: str, messages: list[Message]) -> None:
        if self.capacity == 0:
            return
        self._items[response_id] = Stored(tuple(messages))
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)


class RedisResponseStore:
    def __init__(self, client: Any, seconds: int, prefix: str = "metis:gateway:responses:"):
        self.client, self.seconds, self.prefix = client, seconds, prefix

    async def get(self, response_id: str) -> Stored | None:
        found = await self.client.get(self.prefix + response_id)
        if found is None:
            return None
        return Stored(tuple(Message.model_validate(m) for m in json.loads(found)))

    async def put(self, response_id: str, messages: list[Message]) -> None:
        data = json.dumps([m.model_dump(mode="json", exclude_none=True) for m in messages])
        await self.client.set(self.prefix + response_id, data, ex=self.seconds)
