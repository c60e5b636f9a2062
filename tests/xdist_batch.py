"""One message per test from an xdist worker to the controller, instead of six.

A worker tells the controller of each test in six execnet messages (logstart, three reports,
logfinish, runtest_protocol_complete); each is serialized, written to the pipe, read by the
controller's receiving thread and queued on its own. Measured over the default run, the sends
were half of a worker's fixed cost per test, and the receiving threads about half of the
controller's CPU. The worker here holds a test's events and sends them together when the
test is done; the controller unpacks them into its queue in their order, so every hook sees
what it saw before, in the same order, only a test later at most (a worker that dies in a test
is reported from the scheduler's pending list, as before). Events that are not about a test
(collection, readiness, the end, stolen work) go out at once, after what is held.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

BATCH = "metis_batch"  # the one event name added; its kwargs hold ``events``
HELD = frozenset({"logstart", "testreport", "logfinish", "warning_recorded"})
TEST_DONE = "runtest_protocol_complete"


class HeldEvents:
    """Wraps a worker's ``sendevent``: a test's events leave in one message when it ends."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.held: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()  # stolen work is answered from execnet's thread

    def __call__(self, name: str, **kwargs: Any) -> None:
        with self.lock:
            if name in HELD:
                self.held.append((name, kwargs))
                return
            if name == TEST_DONE:
                self.held.append((name, kwargs))
            else:
                self.flush()
                self.send(name, **kwargs)
                return
            self.flush()

    def flush(self) -> None:
        held, self.held = self.held, []
        if len(held) == 1:
            self.send(held[0][0], **held[0][1])
        elif held:
            self.send(BATCH, events=held)


def batch_worker_events(config: pytest.Config) -> None:
    """In a worker: its interactor's events go out one message per test. (xdist runs
    ``xdist/remote.py`` in the worker as execnet's ``__channelexec__`` module, not as
    ``xdist.remote``: its class is found by name.)"""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "sendevent"):
            plugin.sendevent = HeldEvents(plugin.sendevent)


def unpack_batches_in_controller() -> None:
    """In the controller: a batch is queued as the events it holds, in their order."""
    from xdist.workermanage import WorkerController

    original = WorkerController.process_from_remote
    if not getattr(original, "unpacks_batches", False):
        WorkerController.process_from_remote = unpacking(original)  # type: ignore[method-assign]


def unpacking(process: Any) -> Any:
    """``process(controller, eventcall)`` for each event a batch holds, in order."""

    def process_from_remote(self: Any, eventcall: Any) -> None:
        if isinstance(eventcall, tuple) and eventcall[0] == BATCH:
            for name, kwargs in eventcall[1]["events"]:
                process(self, (name, kwargs))
            return
        process(self, eventcall)

    process_from_remote.unpacks_batches = True  # type: ignore[attr-defined]
    return process_from_remote
