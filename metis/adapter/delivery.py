"""What the adapter adds to every call: its own watch, outermost of all (docs/engine.md), and
the fold of a call's events into a response."""

from __future__ import annotations

import time
from dataclasses import replace

from metis.errors import scrub_error
from metis.model.events import MessageComplete, MessageStart, StreamEvent
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, StopKind, StopReason
from metis.pipeline.call import Call
from metis.pipeline.cancellation import CancelHandle
from metis.pipeline.hooks import Passed, Watch


class Delivery(Watch):
    """The adapter's own watch, outermost of all: the call's warnings on its
    ``message.start`` (those of the request, known before it was sent) and its
    ``message.complete``, its secrets hidden from any error, its cancel handle let go."""

    __slots__ = ("call", "inflight")

    def __init__(self, call: Call, inflight: dict[str, list[CancelHandle]]) -> None:
        self.call, self.inflight = call, inflight

    kinds = (MessageStart,)  # and the message's end, in completed

    def event(self, event: StreamEvent) -> Passed:
        if isinstance(event, MessageStart) and self.call.warnings:
            event.warnings = list(self.call.warnings)  # not yet out of the pipeline
        return event

    async def completed(self, event: MessageComplete) -> MessageComplete:
        """Last of all (the tool-id store written): the call's warnings on it; delivered,
        nothing left to cancel. A cancel that came after the answer's last bytes were read
        (so nothing was left to interrupt) still ends the call cancelled, with all it holds:
        ``cancel()`` answered True (docs/contract.md §1)."""
        cancel = self.call.cancel
        cancel.finished = True
        if cancel.cancelled and event.stop_reason.kind is not StopKind.CANCELLED:
            stop = StopReason(kind=StopKind.CANCELLED)
            return replace(event, stop_reason=stop, warnings=list(self.call.warnings))
        return replace(event, warnings=list(self.call.warnings))

    def close(self, error: BaseException | None) -> BaseException | None:
        if isinstance(error, Exception):  # the endpoint's, and credentials fetched for the call
            scrub_error(error, self.call.secrets)
        call = self.call
        call.cancel.finished = True
        handles = self.inflight[call.request_id]
        handles.remove(call.cancel)
        if not handles:
            del self.inflight[call.request_id]
        return None


def folded(
    provider: str, request: CanonicalRequest | Call, final: MessageComplete, started: float
) -> CanonicalResponse:
    """A call's response: its ``message.complete``, with how long it took since ``started``
    (``time.monotonic()``); ``request`` names its id and model (the request, or a batch item's
    call)."""
    return CanonicalResponse(
        request_id=request.request_id,
        model=request.model,
        provider=provider,
        content=final.final_content,
        stop_reason=final.stop_reason,
        usage=final.usage,
        latency_ms=int((time.monotonic() - started) * 1000),
        message_id=final.message_id,
        warnings=final.warnings,
    )
