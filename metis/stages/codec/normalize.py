"""normalize: the provider's objects become canonical events, via its codec (docs/contract.md §2).

A streamed response feeds the codec's parser object by object; a whole JSON body goes through
``parse_body`` and gives the very same events, so everything outside this stage has one path.
Failures become classified errors here: an HTTP error answer through the codec's error
mapping, and a failure after the message began ends it as docs/contract.md §4 says, with a final
``message.complete`` (stop reason ``error``, the partial content) before the error is raised.
Objects that arrive after the codec ended the message (after Anthropic's ``message_stop``,
Responses' ``response.completed``, Ollama's ``done: true``) make no events: one WARN record
says they were ignored, junk that cannot be read is ignored too, and only a provider error
event (or a transport failure) among them is still raised, after ``message.complete``. The
decode stage reads nothing after OpenAI's ``[DONE]``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.catalog.estimate import CHARS_PER_TOKEN
from metis.errors import AdapterError, CancelledError, ProtocolError, redact, scrub_error
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.stacks.dialect import rules_name
from metis.stages.codec.decode import MAX_IGNORED_AFTER_END, WholeBody, warn_ignored_after_end
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec

log = logging.getLogger("metis")


class Normalize(Stage[WireRequest, WireRequest, dict[str, Any], StreamEvent]):
    name = "normalize"

    dialect_option = "codec"

    @classmethod
    def dialect(cls, options: dict[str, Any]) -> str | None:
        codec, settings = options.get("codec"), options.get("settings")
        if not isinstance(codec, str):
            return None
        return rules_name(codec, settings if isinstance(settings, dict) else None)

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        codec: str
        settings: dict[str, Any] = Field(default_factory=dict)

    options: Options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.codec = get_codec(self.options.codec, self.options.settings)
        self._secrets: tuple[str, ...] = ()

    def bind(self, services: StageServices) -> None:
        self._secrets = services.secrets

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, dict[str, Any]]
    ) -> AsyncIterator[StreamEvent]:
        builder = self._builder(request, call)
        out = builder.out
        after_end = _AfterEnd(self.codec, call)  # objects after the end of the message
        try:
            if request.stream:
                parser = self.codec.stream_parser(builder)
                feed = parser.feed
                whole = False
                async for obj in inner(request, call):
                    if builder.completed:  # the provider's terminal event has been read
                        if not after_end.take(obj):
                            break
                        continue
                    if obj.__class__ is WholeBody:  # a complete reply where a stream was due
                        whole = True
                        self.codec.parse_body(obj, builder)
                    else:
                        feed(obj)
                    if out:
                        for event in out:
                            yield event
                        out.clear()
                if not whole:
                    parser.end()
            else:
                async for obj in inner(request, call):
                    self.codec.parse_body(obj, builder)
            if not builder.completed:
                raise ProtocolError(f"{call.provider} response ended before the message did")
        except CancelledError:
            # docs/contract.md §2: a cancelled stream ends with its partial content and terminates.
            builder.finish(StopReason(kind=StopKind.CANCELLED, raw=None))
            for event in out:
                yield event
            return
        except HTTPFailure as failure:
            raise self._classified(
                self.codec.error_from_http(failure.status, failure.headers, failure.body), call
            ) from None
        except AdapterError as error:
            self._classified(error, call)
            if (
                builder.completed and not out and isinstance(error, ProtocolError)
            ):  # junk after the end
                if not after_end.ignored:
                    warn_ignored_after_end(call, "the end of the message", error, self._secrets)
                return
            if builder.started and not builder.completed:
                builder.finish(StopReason(kind=StopKind.ERROR, raw=error.provider_code))
            for event in out:
                yield event
            raise  # as it came: its cause (the transport's failure) stays attached
        for event in out:
            yield event

    def _builder(self, request: WireRequest, call: Call) -> MessageBuilder:
        builder = MessageBuilder(call.provider, call.model, call.warn_dropped)
        builder.estimate_usage = lambda b: _estimate_usage(b, request, call)
        secrets = self._secrets
        builder.invalid_arguments = lambda *tool: _invalid_arguments(
            call, (*secrets, *call.secrets), *tool
        )
        return builder

    def _classified(self, error: AdapterError, call: Call) -> AdapterError:
        error.provider = error.provider or call.provider
        error.request_id = error.request_id or call.request_id
        scrub_error(error, (*self._secrets, *call.secrets))  # a server may echo a key back
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
        _raise_error_event(self._parser, obj)
        return True


def _raise_error_event(parser: Any, obj: dict[str, Any]) -> None:
    """After the end an object makes no event, but a provider error event is still raised
    (after ``message.complete``); what the codec cannot read is ignored."""
    with contextlib.suppress(ProtocolError):
        parser.feed(obj)


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
