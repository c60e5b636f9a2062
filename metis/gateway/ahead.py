"""What a request's answer needs only once the upstream answers, made while the upstream
thinks (docs/gateway.md, "The first byte").

A translated stream's first bytes wait for the upstream's first event. Its writer (and the
message id that writer writes), its headers and the report of what the reader left out are
not needed before then, and none of them can refuse the request; made before the request is
sent, they would delay the send. :func:`soon` and :class:`Ahead` run such work when the
request's task first waits: under asyncio a callback of the loop, which in the steady state
(the request's body read, a connection to the upstream kept open) runs as the task waits for
the upstream's answer, after the request is written. Under trio the work is done at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def soon(work: Callable[[], object]) -> None:
    """``work`` run when the current task first waits (at once when not under asyncio); it
    runs however the request ends, so what it says (a log line) is never lost."""
    loop = asyncio._get_running_loop()
    if loop is None:
        work()
    else:
        loop.call_soon(work)


class Ahead(Generic[T]):
    """``make()`` made when the current task first waits, and given by :meth:`made`, or made
    there when that has not come. A failure is not kept: :meth:`made` makes it again, so it
    raises where it is asked for, as it did before."""

    __slots__ = ("_handle", "_made", "_make")

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._made: list[T] = []
        loop = asyncio._get_running_loop()
        self._handle = None if loop is None else loop.call_soon(self._run)

    def _run(self) -> None:
        self._handle = None
        with contextlib.suppress(Exception):  # made again, and raised, where it is asked for
            self._made.append(self._make())

    def made(self) -> T:
        self.cancel()
        return self._made[0] if self._made else self._make()

    def cancel(self) -> None:
        """Not made at all, if not made yet (the request failed before its answer)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
