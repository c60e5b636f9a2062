"""A stream's body begun before it is handed to the server.

An async generator that was never begun has no ``finally`` to run: closing it, or dropping
it, runs none of its body. A gateway stream gives its key's place back and closes its
upstream call in its generator's ``finally``, so a body the server never began (the client
gone as the headers went out, a deadline already past) would hold that place for good. Its
first chunk is taken here instead, so from then on however the body is left (read to its
end, closed, dropped) its ending runs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any


class Begun:
    """``head`` (unless empty), then the rest of ``body``; after the head each chunk is the
    generator's own (no frame of this class per chunk)."""

    __slots__ = ("_body", "_head", "_next")

    def __init__(self, head: bytes, body: AsyncGenerator[bytes, None]) -> None:
        self._head, self._body = head, body
        self._next: Callable[[], Awaitable[bytes]] = self._first

    def __aiter__(self) -> Begun:
        return self

    def __anext__(self) -> Awaitable[bytes]:
        return self._next()

    async def _first(self) -> bytes:
        self._next = self._body.__anext__
        return self._head or await self._body.__anext__()

    async def aclose(self) -> None:
        await self._body.aclose()


async def begun(body: AsyncGenerator[bytes, None]) -> Begun | AsyncGenerator[bytes, None]:
    """``body`` with its first chunk taken (an empty body is handed on as it is: it has
    ended, its ``finally`` run)."""
    try:
        head = await anext(body)
    except StopAsyncIteration:
        return body
    return Begun(head, body)


def finished(chunks: AsyncIterator[Any]) -> bool:
    """Whether ``chunks`` (an async generator, or a :class:`Begun`'s) has run to its end or
    been closed: its ending has run, and closing it again does nothing (so no shielded
    scope is made for it: one less at every stream's end)."""
    body = chunks._body if isinstance(chunks, Begun) else chunks
    return getattr(body, "ag_frame", True) is None


def next_of(chunks: AsyncIterator[bytes]) -> Callable[[], Awaitable[bytes]]:
    """What gives ``chunks``' next chunk: once a :class:`Begun` has given its head, its body's
    own ``__anext__`` (no frame of the Begun's at every chunk)."""
    if isinstance(chunks, Begun) and chunks._next != chunks._first:
        return chunks._next
    return chunks.__anext__
