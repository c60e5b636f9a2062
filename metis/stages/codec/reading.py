"""One call's reading of a provider's answer: its objects in, canonical events out.

:class:`CallReader` is what the ``normalize`` stage does for one call, in pull style: the
send loop (and the stage, run on its own) hands it each object the framing gives, and takes
the events it returns (``feed``), then the message's end (``finish``), or the ending of a
message cut short (``ended``: a cancelled call ends with its partial content and stop reason
``cancelled``; an HTTP error answer becomes the codec's classified error; a failure after the
message began ends it with stop reason ``error`` before the error is raised, as
docs/contract.md §2 and §4 say).

Objects that arrive after the codec ended the message make no events: one WARN record says
they were ignored, junk that cannot be read is ignored too, and only a provider error event
(or a transport failure) among them is still raised, after ``message.complete``; reading
stops ``MAX_IGNORED_AFTER_END`` objects later (:attr:`CallReader.stopped`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from metis.catalog.estimate import CHARS_PER_TOKEN
from metis.errors import AdapterError, CancelledError, ProtocolError, redact, scrub_error
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.wire.builder import MessageBuilder
from metis.wire.framing.objects import WholeBody

log = logging.getLogger("metis")

MAX_IGNORED_AFTER_END = 64
"""How many events a stream may send after its terminal event before metis stops reading it."""

_NOTHING: list[StreamEvent] = []


class CallReader:
    """The events of one answer, read object by object through the provider's codec."""

    __slots__ = (
        "_after_end",
        "_builder",
        "_call",
        "_codec",
        "_parser",
        "_secrets",
        "_streamed",
        "_whole",
        "stopped",
    )

    def __init__(
        self, codec: Any, request: WireRequest, call: Call, secrets: tuple[str, ...]
    ) -> None:
        self._codec, self._call, self._secrets = codec, call, secrets
        builder = self._builder = MessageBuilder(call.provider, call.model, call.warn_dropped)
        builder.estimate_usage = lambda b: _estimate_usage(b, request, call)
        builder.invalid_arguments = lambda *tool: _invalid_arguments(
            call, (*secrets, *call.secrets), *tool
        )
        self._streamed = request.stream
        self._parser = codec.stream_parser(builder) if request.stream else None
        self._after_end = _AfterEnd(codec, call)
        self._whole = False
        self.stopped = False

    def feed(self, obj: dict[str, Any]) -> list[StreamEvent]:
        builder = self._builder
        if builder.completed:  # the provider's terminal event has been read
            self.stopped = not self._after_end.take(obj)
            return _NOTHING
        parser = self._parser
        if parser is None or obj.__class__ is WholeBody:
            self._whole = parser is not None
            self._codec.parse_body(obj, builder)
        else:
            parser.feed(obj)
        out = builder.out
        if not out:
            return _NOTHING
        builder.out = []
        return out

    def finish(self) -> list[StreamEvent]:
        """The body ended: the message's last events, or a ProtocolError if it was cut."""
        builder = self._builder
        if self._parser is not None and not self._whole:
            self._parser.end()
        if not builder.completed:
            raise ProtocolError(f"{self._call.provider} response ended before the message did")
        return self._drain()

    def ended(self, error: Exception) -> tuple[list[StreamEvent], Exception | None]:
        builder = self._builder
        if isinstance(error, CancelledError):
            # docs/contract.md §2: a cancelled stream ends with its partial content.
            builder.finish(StopReason(kind=StopKind.CANCELLED, raw=None))
            return self._drain(), None
        if isinstance(error, HTTPFailure):
            classified = self._classified(
                self._codec.error_from_http(error.status, error.headers, error.body)
            )
            classified.__cause__ = None
            classified.__suppress_context__ = True
            return _NOTHING, classified
        if not isinstance(error, AdapterError):
            return self._drain(), error  # a bug, not bad input: raised as itself
        self._classified(error)
        if builder.completed and not builder.out and isinstance(error, ProtocolError):
            if not self._after_end.ignored:  # junk after the end
                warn_ignored_after_end(self._call, "the end of the message", error, self._secrets)
            return _NOTHING, None
        if builder.started and not builder.completed:
            builder.finish(StopReason(kind=StopKind.ERROR, raw=error.provider_code))
        return self._drain(), error  # as it came: its cause stays attached

    def _drain(self) -> list[StreamEvent]:
        out = self._builder.out
        self._builder.out = []
        return out

    def _classified(self, error: AdapterError) -> AdapterError:
        error.provider = error.provider or self._call.provider
        error.request_id = error.request_id or self._call.request_id
        scrub_error(error, (*self._secrets, *self._call.secrets))  # a server may echo a key back
        return error


class _AfterEnd:
    """What a stream sends after its terminal event: one WARN, nothing parsed into events,
    a provider error event still raised, and reading stops ``MAX_IGNORED_AFTER_END`` later."""

    __slots__ = ("_call", "_codec", "_parser", "ignored")

    def __init__(self, codec: Any, call: Call) -> None:
        self._codec, self._call = codec, call
        self._parser: Any = None  # a parser whose events are thrown away
        self.ignored = 0

    def take(self, obj: dict[str, Any]) -> bool:
        """Whether reading goes on after ``obj``."""
        self.ignored += 1
        if self._parser is None:
            warn_ignored_after_end(self._call, "the end of the message")
            self._parser = self._codec.stream_parser(MessageBuilder(self._call.provider, ""))
        if self.ignored > MAX_IGNORED_AFTER_END:
            return False
        with contextlib.suppress(ProtocolError):  # unreadable: ignored; an error event raises
            self._parser.feed(obj)
        return True


def warn_ignored_after_end(
    call: Call, terminal: str, error: Exception | None = None, secrets: tuple[str, ...] = ()
) -> None:
    """The one WARN record for a stream that went on after its terminal event (or failed
    while it was read on)."""
    log.warning(
        "%s sent more after %s; ignored%s",
        call.provider,
        terminal,
        f" ({redact(str(error), *secrets, *call.secrets)})" if error is not None else "",
        extra={
            "event": "metis.events_after_end",
            "request_id": call.request_id,
            "session_id": call.session_id,
            "adapter": call.provider,
        },
    )


def _estimate_usage(builder: MessageBuilder, request: WireRequest, call: Call) -> None:
    """docs/contract.md §5: no usage from the provider, so estimate it, say so, and mark it."""
    input_chars = len(json.dumps(request.body, ensure_ascii=False))
    output_chars = sum(len(part) for part in builder.output_text())
    builder.usage(
        input_tokens=int(input_chars / CHARS_PER_TOKEN),
        output_tokens=int(output_chars / CHARS_PER_TOKEN),
    )
    builder.usage_estimated = True
    log.warning(
        "%s reported no token usage; estimated it",
        call.provider,
        extra={
            "event": "metis.usage_estimated",
            "request_id": call.request_id,
            "session_id": call.session_id,
            "adapter": call.provider,
        },
    )


def _invalid_arguments(
    call: Call, secrets: tuple[str, ...], name: str, tool_id: str, arguments: str
) -> None:
    """A tool call whose arguments are not a JSON object is kept, marked (``input_error``).
    What the model wrote may quote the key back: the record shows it redacted."""
    name, tool_id, arguments = (redact(text, *secrets) for text in (name, tool_id, arguments))
    log.warning(
        "%s: the arguments of tool call %s (%r) are not a JSON object; the call is kept with "
        "input_error set and its text in provider_raw: %.200r",
        call.provider,
        tool_id,
        name,
        arguments,
        extra={
            "event": "metis.invalid_tool_arguments",
            "request_id": call.request_id,
            "session_id": call.session_id,
            "adapter": call.provider,
            "tool_use_id": tool_id,
            "tool_name": name,
        },
    )
