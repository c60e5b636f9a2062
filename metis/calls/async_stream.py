"""The events of one async one-line call (``metis.astream``), closed at the end of an ``async with``
block."""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator, AsyncIterator
from types import TracebackType
from typing import Generic, Self, TypeVar

T = TypeVar("T")

NEVER_READ = (
    "a stream of metis events was dropped before it was read: its call was never sent (a "
    "session's turn never happened); read it with `for event in ...` (`async for` in async "
    "code), or make the call with complete() / send()"
)
"""The warning for a stream dropped unread, as Python's for a coroutine never awaited."""


def warn_unread() -> None:
    if warnings is not None:  # None at interpreter exit
        warnings.warn(NEVER_READ, RuntimeWarning, stacklevel=3)


class AsyncStream(AsyncIterator[T], Generic[T]):
    """A call's events as they arrive. Leaving the loop early ends the call when the stream is
    closed: ``async with metis.astream(...) as events: async for event in events: ...`` (or
    :meth:`aclose`); read to its end, it closes itself."""

    __slots__ = ("_events", "_read")

    def __init__(self, events: AsyncGenerator[T, None]) -> None:
        self._events = events
        self._read = False

    def __del__(self) -> None:
        if not self._read:
            warn_unread()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        self._read = True
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """End the call and release its connection; again: nothing."""
        self._read = True
        await self._events.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
