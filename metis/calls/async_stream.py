"""The events of one async one-line call (``metis.astream``), closed at the end of an ``async with``
block."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from types import TracebackType
from typing import Generic, Self, TypeVar

T = TypeVar("T")


class AsyncStream(AsyncIterator[T], Generic[T]):
    """A call's events as they arrive. Leaving the loop early ends the call when the stream is
    closed: ``async with metis.astream(...) as events: async for event in events: ...`` (or
    :meth:`aclose`); read to its end, it closes itself."""

    __slots__ = ("_events",)

    def __init__(self, events: AsyncGenerator[T, None]) -> None:
        self._events = events

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """End the call and release its connection; again: nothing."""
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
