"""The loop a session's synchronous forms run on: the one-line calls' own (docs/calls.md)."""

from __future__ import annotations

import asyncio
import sys

from metis.calls.background import BackgroundLoop, background_loop, on_background_loop
from metis.calls.request import ModelLike
from metis.routing.router import Router


def blocking_loop(what: str, model: ModelLike) -> BackgroundLoop:
    """metis's loop for ``Session.<what>()``; refused where waiting on it would deadlock."""
    usage = f"await session.a{what}(...)"
    if on_background_loop():
        raise RuntimeError(
            f"Session.{what}() was called on the event loop metis runs the synchronous calls on "
            "(from a stage, a telemetry sink, a store or a run's event handler), where waiting "
            f"for the reply would wait for itself; there, use '{usage}'"
        )
    if isinstance(model, Router) and _in_event_loop():
        raise RuntimeError(
            f"Session.{what}() with a Router, in a thread running an event loop: the router's "
            "connection pools and shared stores may belong to this loop, which the call would "
            f"block; use '{usage}'"
        )
    return background_loop()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    return bool(trio is not None and trio.lowlevel.in_trio_run())
