"""Aborting one call from anywhere: ``adapter.cancel(request_id)`` (docs/contract.md §2).

Each call gets a handle. The stages that wait on the outside world (the transport reading the
socket, the retry stage sleeping) do each wait inside ``handle.guard()``, a cancel scope that
covers that one wait and nothing else, so a cancel from another task interrupts the wait
promptly on asyncio and trio alike, and no scope ever spans a ``yield``. Where a scope per
wait would cost too much (every read of a response on a real socket, a chunk each in a long
stream), the transport registers an ``on_cancel`` abort instead: shutting its socket down
interrupts the read just as promptly. Once the call's ``message.complete`` has reached the
caller the handle is ``finished``, and ``cancel()`` is False: there is nothing left to cancel.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import TracebackType

import anyio

from metis.errors import CancelledError


class CancelHandle:
    __slots__ = ("_aborts", "_scope", "cancelled", "finished")

    def __init__(self) -> None:
        self._scope: anyio.CancelScope | None = None
        self._aborts: list[Callable[[], None]] = []
        self.cancelled = False
        self.finished = False

    def cancel(self) -> bool:
        """Cancel the call; True only if it was running and is now cancelled."""
        if self.cancelled or self.finished:
            return False
        self.cancelled = True
        if self._scope is not None:
            self._scope.cancel()
        for abort in self._aborts:
            abort()
        return True

    def on_cancel(self, abort: Callable[[], None]) -> None:
        """Also run ``abort`` (which must not raise) on cancel: a way to interrupt a wait
        that no cancel scope covers, such as a read on a socket the transport can shut."""
        if self.cancelled:
            abort()
        self._aborts.append(abort)

    def off(self, abort: Callable[[], None]) -> None:
        if abort in self._aborts:
            self._aborts.remove(abort)

    def guard(self, deadline: float = math.inf) -> Guard:
        """One wait that ``cancel()`` interrupts; raises CancelledError if it did. A wait
        that outlives ``deadline`` is abandoned too: check ``scope.cancelled_caught``."""
        return Guard(self, deadline)

    async def sleep(self, seconds: float) -> None:
        """Sleep, unless the call is cancelled first (then return at once, quietly: the next
        wait raises)."""
        if self.cancelled:
            return
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                await anyio.sleep(seconds)
            finally:
                self._scope = None


class Guard:
    """``CancelHandle.guard()``'s context: the handle's cancel scope for one wait. A class,
    not a generator: every request's upstream exchange waits in one."""

    __slots__ = ("_deadline", "_handle", "_scope")

    def __init__(self, handle: CancelHandle, deadline: float) -> None:
        self._handle = handle
        self._deadline = deadline
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> anyio.CancelScope:
        handle = self._handle
        if handle.cancelled:
            raise CancelledError("the call was cancelled")
        scope = self._scope = anyio.CancelScope(deadline=self._deadline)
        handle._scope = scope.__enter__()
        return scope

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        handle, scope = self._handle, self._scope
        handle._scope = None
        assert scope is not None
        swallowed = bool(scope.__exit__(kind, error, traceback))
        if (error is None or swallowed) and handle.cancelled:
            raise CancelledError("the call was cancelled")
        return swallowed
