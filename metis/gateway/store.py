"""The Responses API's stored conversations, for ``previous_response_id``: in this process,
the oldest forgotten first past the configured number."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from metis.model.content import Message


@dataclass(frozen=True, slots=True)
class Stored:
    """A response's whole conversation: its input (after what it continued) and its reply,
    and the instructions it was given (not carried over, as the API does not)."""

    messages: tuple[Message, ...]


class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, Stored] = OrderedDict()

    def get(self, response_id: str) -> Stored | None:
        return self._items.get(response_id)

    def put(self, response_id: str, messages: list[Message]) -> None:
        if self.capacity == 0:
            return
        self._items[response_id] = Stored(tuple(messages))
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
