"""Cancelling a session's turn from another task or another thread.

A turn waits for two kinds of things: the model's next event and its tool calls. Each wait
runs in a cancel scope of its own, entered and left around the wait (never held across a
``yield`` to the caller, where it would cancel the caller's code instead). ``cancel()`` marks
the turn cancelled and cancels the scope of the wait in progress; every later wait of the turn
is cancelled at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import anyio.from_thread
import anyio.lowlevel


class TurnControl:
    """One turn's cancellation, made on the event loop the turn runs on."""

    def __init__(self) -> None:
        self.cancelled = False
        self._scope: anyio.CancelScope | None = None
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    @contextmanager
    def wait(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one wait of the turn; ``cancel_caught`` tells whether
        :meth:`cancel` ended it."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.cancelled:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None

    def cancel(self) -> None:
        """Cancel the turn, from any thread."""
        if threading.get_ident() == self._thread:
            self._cancel_here()
            return
        with contextlib.suppress(RuntimeError):  # the loop has ended: so has the turn
            anyio.from_thread.run_sync(self._cancel_here, token=self._token)

    def _cancel_here(self) -> None:
        self.cancelled = True
        if self._scope is not None:
            self._scope.cancel()
