"""Slots that callers on any event loop, in any thread, take and give back.

anyio's (and asyncio's) locks and limiters belong to one event loop: a waiter parked on one
is a future of its own loop, which a release made on another loop (another thread's, or trio
after asyncio) cannot wake, so it waits for good; under trio, one made under asyncio is a bare
RuntimeError. An adapter or a router made once serves one ``asyncio.run`` after another,
trio, and threads each running a loop, so what they share is :class:`AnyLoopSlots`: the count
under a thread lock, waiters served first come first, each woken on its own loop.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

import anyio

__all__ = ["AnyLoopSlots"]


@dataclass(eq=False)
class _Waiter:
    borrower: object
    woken: anyio.Event
    loop: object
    """The waiter's loop: an asyncio loop or a trio run's token."""
    thread: int = field(default_factory=threading.get_ident)
    granted: bool = False


class AnyLoopSlots:
    """``total`` slots, each held by one borrower until it is given back."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._lock = threading.Lock()
        self._holders: set[object] = set()
        self._waiters: deque[_Waiter] = deque()

    def take_nowait(self, borrower: object) -> bool:
        """Whether a slot was free (and is now ``borrower``'s), none waiting before it."""
        with self._lock:
            if len(self._holders) < self.total and not self._waiters:
                self._holders.add(borrower)
                return True
            return False

    async def take(self, borrower: object) -> None:
        """A slot for ``borrower``, waiting for one in turn; a cancelled wait takes none."""
        if self.take_nowait(borrower):
            return
        import anyio.lowlevel  # with the first wait, not with the adapter

        waiter = _Waiter(borrower, anyio.Event(), anyio.lowlevel.current_token().native_token)
        with self._lock:
            self._waiters.append(waiter)
        try:
            await waiter.woken.wait()
        except BaseException:
            with self._lock:
                granted = waiter.granted
                if not granted:
                    self._waiters.remove(waiter)
            if granted:  # given the slot as it was cancelled: it goes to the next
                self.give_back(borrower)
            raise

    def give_back(self, borrower: object) -> None:
        """``borrower``'s slot to the first waiter, or free (a slot not held: nothing)."""
        with self._lock:
            if borrower not in self._holders:
                return
            self._holders.discard(borrower)
            if not self._waiters:
                return
            waiter = self._waiters.popleft()
            waiter.granted = True
            self._holders.add(waiter.borrower)
        if not _wake(waiter):  # its loop has ended: the slot goes on
            self.give_back(waiter.borrower)


def _wake(waiter: _Waiter) -> bool:
    """Set the waiter's event on its own loop; False when that loop no longer runs."""
    if waiter.thread == threading.get_ident():
        waiter.woken.set()
        return True
    loop = waiter.loop
    try:
        if hasattr(loop, "call_soon_threadsafe"):  # asyncio
            loop.call_soon_threadsafe(waiter.woken.set)
        else:  # a trio run's token
            loop.run_sync_soon(waiter.woken.set)  # type: ignore[attr-defined]
    except RuntimeError:  # asyncio: the loop is closed; trio: the run has ended
        return False
    return True
