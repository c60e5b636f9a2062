"""Reading one response: the provider's framed objects in, canonical events out. Sans-IO.

:class:`ResponseReader` holds everything between the framing (SSE, NDJSON, AWS event stream,
a whole JSON body) and the canonical events except the IO: the codec's parser and its
:class:`~metis.wire.builder.MessageBuilder`, the endings of docs/contract.md §2
and §4, the usage estimate of §5 and what to do with objects that come after the end. It
needs no event loop; its caller reads the bytes, frames them, and hands each object over::

    reader = ResponseReader(codec, call, request_body=body, secrets=secrets)
    try:
        for obj in objects:                  # framed objects, as they arrive
            yield from reader.feed(obj)      # or reader.body(obj): a whole JSON reply
            if not reader.reading:           # enough was read after the end: stop
                break
        yield from reader.finish()           # end of input
    except CancelledError:
        yield from reader.cancel()           # message.complete, stop reason cancelled
    except HTTPFailure as failure:           # a non-2xx answer
        raise reader.http_error(failure.status, failure.headers, failure.body) from None
    except AdapterError as error:
        ending = reader.fail(error)
        if ending is None:                   # junk after the end: ignored, one WARN
            return
        yield from ending                    # message.complete, stop reason error
        raise

Every method returns the events it made (``feed`` and ``body`` those of the object,
``finish`` the message's last ones) and each event comes out once. A failure after the message
began ends it as docs/contract.md §4 says: ``fail`` gives ``message.complete`` with stop reason
``error`` and the partial content, and the caller raises the error (classified: provider,
request id, the secrets scrubbed). Objects that arrive after the message ended (after
Anthropic's ``message_stop``, Responses' ``response.completed``, Ollama's ``done: true``) make
no events: one WARN record says they were ignored, junk that cannot be read is ignored too,
and only a provider error event among them is still raised; ``reading`` turns False
``MAX_IGNORED_AFTER_END`` objects later.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from metis.catalog.token_profile import CHARS_PER_TOKEN
from metis.errors import AdapterError, ProtocolError, redact, scrub_error
from metis.model.content import ToolUseBlock
from metis.model.events import MessageComplete, StreamEvent
from metis.model.response import StopKind, StopReason
from metis.wire.builder import INVALID_ARGUMENTS, NO_EVENTS, MessageBuilder
from metis.wire.codec import Codec, StreamParser

log = logging.getLogger("metis")

MAX_IGNORED_AFTER_END = 64
"""How many events a stream may send after its terminal event before metis stops reading it."""

_CANCELLED = StopReason(kind=StopKind.CANCELLED, raw=None)


class ReadContext(Protocol):
    """What the reader needs of the call: its identity, for errors and log records, and
    where content dropped on the way in is reported. :class:`~metis.pipeline.call.Call` is
    one."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def request_id(self) -> str: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values no error or log record of the call may show (credentials fetched for it
        may be added while it runs)."""
        ...

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None: ...


class ResponseReader:
    """One response of one call, read through ``codec`` (see the module's docstring): a
    stream's objects go to ``feed``, a whole reply to ``body``.

    ``context``: the call (its identity, and where dropped content is reported).
    ``request_body``: what was sent, to estimate the input when the provider reports no
    usage. ``secrets``: values hidden from errors and log records, besides the call's own
    (read when needed: a stage may add one while the response is read)."""

    __slots__ = (
        "_builder",
        "_codec",
        "_complete",
        "_context",
        "_ignored",
        "_parser",
        "_request_body",
        "_secrets",
        "_spare",
        "_unsent",
        "_whole",
        "reading",
    )

    def __init__(
        self,
        codec: Codec,
        context: ReadContext,
        *,
        request_body: Mapping[str, Any] | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._codec = codec
        self._context = context
        self._secrets = secrets
        self._request_body = request_body
        self._builder = builder = MessageBuilder(
            context.provider,
            context.model,
            context.warn_dropped,
            # (not a method of the reader: the builder would hold the reader in a cycle)
            partial(_estimated_input_tokens, context, request_body)
            if request_body is not None
            else None,
        )
        self._parser = codec.stream_parser(builder)
        self._complete = False  # the message ended and its ending was looked at
        self._whole = False  # a whole reply was read (body)
        self._ignored = 0  # objects read after the end
        self._spare: StreamParser | None = None  # reads them, its events thrown away
        self._unsent: Sequence[StreamEvent] = NO_EVENTS
        self.reading = True
        """False once the reader wants no more objects: stop reading, then ``finish``."""

    @property
    def completed(self) -> bool:
        """Whether the message has ended (its ``message.complete`` made)."""
        return self._builder.completed

    # Input --------------------------------------------------------------------------------

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        """One object of a stream: the events it made."""
        if self._complete:
            return self._after_end(obj)
        events = self._parser.feed(obj)
        if self._builder.completed:
            self._ended(events)
        return events

    def feed_into(self, objects: Iterable[dict[str, Any]], events: list[StreamEvent]) -> None:
        """:meth:`feed` of each of ``objects`` in turn (the objects of one read), their
        events added to ``events`` as they are made: those of the objects before one that
        raises are there."""
        parser, builder = self._parser, self._builder
        for obj in objects:
            if self._complete:
                events += self._after_end(obj)
                continue
            made = parser.feed(obj)
            events += made
            if builder.completed:
                self._ended(made)

    def body(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        """A whole JSON reply (also where a stream was asked for): its events, finished."""
        if self._complete:
            return self._after_end(obj)
        self._whole = True
        events = self._codec.parse_body(obj, self._builder)
        if self._builder.completed:
            self._ended(events)
        return events

    def finish(self, marked: bool = False) -> Sequence[StreamEvent]:
        """The input ended: the message's last events, or ProtocolError when it never
        completed. ``marked``: it ended with the framing's end marker (``[DONE]``), which a
        parser with ``end_marked`` reads as a whole reply."""
        if self._whole:
            events = NO_EVENTS
        elif marked and (end_marked := getattr(self._parser, "end_marked", None)) is not None:
            events = end_marked()
        else:
            events = self._parser.end()
        if not self._builder.completed:
            self._unsent = events  # given with the error's ending
            raise ProtocolError(f"{self._context.provider} response ended before the message did")
        self._ended(events)
        return events

    # Endings ------------------------------------------------------------------------------

    def cancel(self) -> Sequence[StreamEvent]:
        """The call was cancelled: open tools closed, then ``message.complete`` with stop
        reason ``cancelled`` and what arrived (the events not yet given come first)."""
        events = self._unsent_events()
        if not self._builder.completed:
            events += self._parser.interrupt(_CANCELLED)  # it may hold usage not yet read
        self._ended(events)
        return events

    def fail(self, error: AdapterError) -> Sequence[StreamEvent] | None:
        """``error`` ends the reading (the caller raises it after these events): it is
        classified, and a message that began ends with ``message.complete``, stop reason
        ``error``, after the events not yet given. None when ``error`` is junk read after the
        message ended: it is ignored, with one WARN record, and not raised."""
        self._classified(error)
        builder = self._builder
        events = self._unsent_events()
        if builder.completed and not events and isinstance(error, ProtocolError):
            if not self._ignored:  # else the WARN for what came after the end was given
                warn_ignored_after_end(
                    self._context, "the end of the message", error, self._secrets
                )
            return None
        if builder.started and not builder.completed:
            ending = StopReason(kind=StopKind.ERROR, raw=error.provider_code)
            events += self._parser.interrupt(ending)
        if builder.completed:
            self._ended(events)
        return events

    def http_error(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        """A non-2xx answer as the classified error to raise."""
        return self._classified(self._codec.error_from_http(status, headers, body))

    # Internals ----------------------------------------------------------------------------

    def _unsent_events(self) -> list[StreamEvent]:
        """The events made but not given: by an object whose reading failed, or by an end
        of input that left the message unfinished."""
        events = [*self._unsent, *self._builder.take()]
        self._unsent = NO_EVENTS
        return events

    def _after_end(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        self._ignored += 1
        if self._spare is None:
            warn_ignored_after_end(self._context, "the end of the message")
            self._spare = self._codec.stream_parser(MessageBuilder(self._context.provider, ""))
        if self._ignored > MAX_IGNORED_AFTER_END:
            self.reading = False
        else:
            with contextlib.suppress(ProtocolError):  # a provider error event is still raised
                self._spare.feed(obj)
        return NO_EVENTS

    def _ended(self, events: Sequence[StreamEvent]) -> None:
        """The message ended (its ``message.complete`` is among ``events``): report the tool
        calls whose arguments are not a JSON object."""
        if self._complete:
            return
        self._complete = True
        for event in reversed(events):
            if event.__class__ is MessageComplete:
                for block in event.final_content:
                    if isinstance(block, ToolUseBlock) and block.input_error == INVALID_ARGUMENTS:
                        self._invalid_arguments(block)
                return

    def _all_secrets(self) -> tuple[str, ...]:
        return (*self._secrets, *self._context.secrets)

    def _classified(self, error: AdapterError) -> AdapterError:
        error.provider = error.provider or self._context.provider
        error.request_id = error.request_id or self._context.request_id
        scrub_error(error, self._all_secrets())  # a server may echo a key back
        return error

    def _invalid_arguments(self, block: ToolUseBlock) -> None:
        """A tool call whose arguments are not a JSON object is kept, marked (``input_error``,
        its text in ``provider_raw``). What the model wrote may quote the key back: the
        record shows it redacted."""
        context, secrets = self._context, self._all_secrets()
        raw = block.provider_raw.data.get("arguments", "") if block.provider_raw else ""
        name, tool_id, arguments = (
            redact(str(text), *secrets) for text in (block.name, block.id, raw)
        )
        log.warning(
            "%s: the arguments of tool call %s (%r) are not a JSON object; the call is kept with "
            "input_error set and its text in provider_raw: %.200r",
            context.provider,
            tool_id,
            name,
            arguments,
            extra={
                "event": "metis.invalid_tool_arguments",
                "request_id": context.request_id,
                "session_id": context.session_id,
                "adapter": context.provider,
                "tool_use_id": tool_id,
                "tool_name": name,
            },
        )


def warn_ignored_after_end(
    context: ReadContext,
    terminal: str,
    error: Exception | None = None,
    secrets: tuple[str, ...] = (),
) -> None:
    """The one WARN record for a stream that went on after its terminal event (or failed
    while it was read on)."""
    log.warning(
        "%s sent more after %s; ignored%s",
        context.provider,
        terminal,
        f" ({redact(str(error), *secrets, *context.secrets)})" if error is not None else "",
        extra={
            "event": "metis.events_after_end",
            "request_id": context.request_id,
            "session_id": context.session_id,
            "adapter": context.provider,
        },
    )


def _estimated_input_tokens(context: ReadContext, request_body: Mapping[str, Any]) -> int:
    """docs/contract.md §5: no usage from the provider, so estimate it and say so."""
    log.warning(
        "%s reported no usable token usage; estimated it",
        context.provider,
        extra={
            "event": "metis.usage_estimated",
            "request_id": context.request_id,
            "session_id": context.session_id,
            "adapter": context.provider,
        },
    )
    return body_tokens(request_body)


def body_tokens(body: Mapping[str, Any]) -> int:
    """The input tokens a request body is estimated at when its provider reports no usage:
    its JSON's characters over the average characters a token (docs/contract.md §5)."""
    return int(len(json.dumps(body, ensure_ascii=False)) / CHARS_PER_TOKEN)
