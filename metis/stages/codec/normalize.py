"""normalize: the provider's objects become canonical events, via its codec (docs/contract.md §2).

A thin loop over a :class:`~metis.wire.response_reader.ResponseReader`, which holds all
of it but the IO: a streamed response is read object by object, a whole JSON body (also one
given where a stream was asked for) through the codec's ``parse_body``, with the very same
events, so everything outside this stage has one path. Failures become classified errors:
an HTTP error answer through the codec's error mapping, and a failure after the message began
ends it as docs/contract.md §4 says, with a final ``message.complete`` (stop reason ``error``,
the partial content) before the error is raised. Objects that arrive after the codec ended the
message make no events (one WARN record; a provider error event among them is still raised).
The decode stage reads nothing after OpenAI's ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.errors import AdapterError, CancelledError
from metis.model.events import StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.stacks.dialect import rules_name
from metis.stages.codec.decode import WholeBody
from metis.wire.codec import get_codec
from metis.wire.response_reader import ResponseReader


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
        reader = ResponseReader(
            self.codec,
            call,
            request_body=request.body,
            secrets=self._secrets,
        )
        try:
            if request.stream:
                feed = reader.feed
                async for obj in inner(request, call):
                    events = reader.body(obj) if obj.__class__ is WholeBody else feed(obj)
                    for event in events:
                        yield event
                    if not reader.reading:
                        break
            else:
                async for obj in inner(request, call):
                    for event in reader.body(obj):
                        yield event
            for event in reader.finish():
                yield event
        except CancelledError:
            # docs/contract.md §2: a cancelled stream ends with its partial content and terminates.
            for event in reader.cancel():
                yield event
            return
        except HTTPFailure as failure:
            raise reader.http_error(failure.status, failure.headers, failure.body) from None
        except AdapterError as error:
            ending = reader.fail(error)
            if ending is None:  # junk after the end of the message
                return
            for event in ending:
                yield event
            raise  # as it came: its cause (the transport's failure) stays attached
