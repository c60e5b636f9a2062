"""The adapter's own watch on every call it makes, outermost of all (docs/engine.md)."""

from __future__ import annotations

from dataclasses import replace

from metis.errors import scrub_error
from metis.model.events import MessageComplete, StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.cancellation import CancelHandle
from metis.pipeline.hooks import Watch


class Delivery(Watch):
    """The adapter's own watch, outermost of all: the call's warnings on its
    ``message.complete``, its secrets hidden from any error, its cancel handle let go."""

    __slots__ = ("call", "inflight", "secrets")

    def __init__(
        self, call: Call, inflight: dict[str, list[CancelHandle]], secrets: tuple[str, ...]
    ) -> None:
        self.call, self.inflight, self.secrets = call, inflight, secrets

    def event(self, event: StreamEvent) -> StreamEvent:
        if event.__class__ is MessageComplete:
            event = replace(event, warnings=list(self.call.warnings))
            self.call.cancel.finished = True  # delivered: nothing left to cancel
        return event

    def close(self, error: BaseException | None) -> BaseException | None:
        if isinstance(error, Exception):
            scrub_error(error, self.secrets)
        call = self.call
        call.cancel.finished = True
        handles = self.inflight[call.request_id]
        handles.remove(call.cancel)
        if not handles:
            del self.inflight[call.request_id]
        return None
