"""Cancelling a session's turn from another task or another thread.

A turn waits for two kinds of things: the model's events and its tool calls. A model call in
flight is cancelled through the adapter's (or router's) own ``cancel``: its stream ends with
``message.complete``, stop reason ``cancelled``, and what arrived (docs/contract.md §2). Tool
calls run in a cancel scope entered and left around them (never held across a ``yield`` to the
caller, where it would cancel the caller's code instead). ``cancel()`` marks the turn
cancelled, stops what it is waiting for, and every later wait of the turn ends at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.from_thread
import anyio.lowlevel


class TurnControl:
    """One turn's cancellation, made on the event loop the turn runs on."""

    def __init__(self) -> None:
        self.cancelled = False
        self.release = False
        """The session's block was left with the turn in flight: when it ends, what providers
        keep open for the session is released."""
        self._scope: anyio.CancelScope | None = None
        self._stop_call: Callable[[], object] | None = None
        self._call_stopped = False
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    @contextmanager
    def wait(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one wait of the turn (its tool calls)."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.cancelled:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None

    @contextmanager
    def calling(self, stop: Callable[[], object]) -> Iterator[None]:
        """A model call in flight, which ``stop()`` cancels (the adapter's ``cancel``)."""
        self._stop_call, self._call_stopped = stop, False
        try:
            yield
        finally:
            self._stop_call = None

    def event_arrived(self) -> None:
        """A cancel asked before the adapter had the call in flight (so it did not stop it)
        stops it now, at its first event."""
        if self.cancelled and not self._call_stopped and self._stop_call is not None:
            self._call_stopped = True
            self._stop_call()

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
        if self._stop_call is not None:
            self._call_stopped = bool(self._stop_call())
