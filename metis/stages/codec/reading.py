"""One call's reading of a provider's answer: the send path's driver of the sans-IO reader.

:class:`CallReader` is the :class:`~metis.wire.response_reader.ResponseReader` of one call,
built by the ``normalize`` stage with the provider's codec, the request's body (for the usage
estimate) and the secrets no error or record may show (the stage's and the call's own). The
reader holds everything but the IO: the send loop (and the stage, run on its own) hands it each
object the framing gives and takes the events it returns. What this class adds is the engine's
side of it, its failures said as the reader's endings (:meth:`CallReader.ended`): a cancelled
call ends with its partial content and stop reason ``cancelled``, an HTTP error answer becomes
the codec's classified error, and a failure after the message began ends it with stop reason
``error`` before the error is raised (docs/contract.md §2 and §4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metis.errors import AdapterError, CancelledError
from metis.model.events import StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.wire.builder import NO_EVENTS
from metis.wire.codec import Codec
from metis.wire.framing.objects import WholeBody
from metis.wire.response_reader import ResponseReader


class CallReader(ResponseReader):
    """The events of one answer, read object by object through the provider's codec:
    :meth:`read` for any object (``feed``, the send loop's hot path, for a stream's objects
    as they arrive), then ``finish``, or :meth:`ended` for a reading cut short."""

    __slots__ = ("_streamed",)

    def __init__(
        self, codec: Codec, request: WireRequest, call: Call, secrets: tuple[str, ...]
    ) -> None:
        super().__init__(codec, call, request_body=request.body, secrets=secrets)
        self._streamed = request.stream

    def read(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        """One object, whichever it is: a whole reply (the answer to a request that was not
        streamed, or a :class:`WholeBody` where a stream was asked for) goes to ``body``, a
        stream's object to ``feed``. The framing gives a whole reply only at the end of the
        body, so the send loop feeds the objects before it directly."""
        if obj.__class__ is WholeBody:  # a plain dict: codecs test ``__class__ is dict``
            return self.body(dict(obj))
        if self._streamed:
            return self.feed(obj)
        return self.body(obj)

    def ended(self, error: Exception) -> tuple[Sequence[StreamEvent], Exception | None]:
        """The events that end a message cut short by ``error``, and the error to raise
        (None when the ending is the whole answer: a cancelled call, or junk after the end)."""
        if isinstance(error, CancelledError):
            return self.cancel(), None
        if isinstance(error, HTTPFailure):
            classified = self.http_error(error.status, error.headers, error.body)
            classified.__cause__ = None
            classified.__suppress_context__ = True
            return NO_EVENTS, classified
        if not isinstance(error, AdapterError):
            return NO_EVENTS, error  # a bug, not bad input: raised as itself
        ending = self.fail(error)
        if ending is None:
            return NO_EVENTS, None
        return ending, error  # as it came: its cause stays attached
