"""A turn's events, read once: iterate them, and leave early inside ``async with``."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TypeVar

from metis.calls.async_stream import AsyncStream, warn_unread

E = TypeVar("E")


class Reader:
    """Whether a turn's stream still has its reader: False once the stream object is dropped
    (a loop left with ``break``, outside ``async with``)."""

    __slots__ = ("gone",)

    def __init__(self) -> None:
        self.gone = False


class TurnStream(AsyncStream[E]):
    """The events of one turn (or run), in order, read once.

    Leaving the loop early ends the turn only when the stream is closed: use it as
    ``async with session.astream(...) as events: async for event in events: ...`` (or call
    :meth:`aclose`); a stream dropped unclosed ends its turn whenever the event loop
    finalizes it (the session's next turn waits for that). Read to its end, it closes itself.
    """

    def __init__(self, events: AsyncGenerator[E, None], reader: Reader | None = None) -> None:
        super().__init__(events)
        self._reader = reader

    def __del__(self) -> None:
        if self._reader is not None:
            self._reader.gone = True
        if not self._read:
            warn_unread()

    async def aclose(self) -> None:
        """End the turn: what arrived is kept (docs/sessions.md)."""
        await super().aclose()
