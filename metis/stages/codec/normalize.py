"""normalize: the provider's objects become canonical events, via its codec (docs/contract.md §2).

The reading is the sans-IO :class:`~metis.wire.response_reader.ResponseReader`, one per call
(:class:`metis.stages.codec.reading.CallReader`, which says the engine's failures as its
endings): a streamed response is read object by object, a whole JSON body (also one given where
a stream was asked for) through the codec's ``parse_body``, with the very same events, so
everything outside this stage has one path. Failures become classified errors: an HTTP error
answer through the codec's error mapping, and a failure after the message began ends it as
docs/contract.md §4 says, with a final ``message.complete`` (stop reason ``error``, the partial
content) before the error is raised. Objects that arrive after the codec ended the message
(after Anthropic's ``message_stop``, Responses' ``response.completed``, Ollama's ``done:
true``) make no events: one WARN record says they were ignored, junk that cannot be read is
ignored too, and only a provider error event (or a transport failure) among them is still
raised, after ``message.complete``. The decode stage reads nothing after OpenAI's ``[DONE]``.

The provider's send loop drives the reader in its own loop, and this stage, run on its own,
does the same. In an adapter it reads with the provider's one codec, the one ``encode`` built.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from metis.model.events import StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.stages.codec.reading import CallReader
from metis.stages.options import CodecOptions, codec_dialect
from metis.wire.codec import get_codec


class Normalize(Stage[WireRequest, WireRequest, dict[str, Any], StreamEvent]):
    name = "normalize"
    role = "reader"
    dialect_option = "codec"
    Options = CodecOptions

    options: CodecOptions

    @classmethod
    def dialect(cls, options: dict[str, Any]) -> str | None:
        return codec_dialect(options)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._codec: Any = None
        self._secrets: tuple[str, ...] = ()

    def bind(self, services: StageServices) -> None:
        self._secrets = services.secrets

    def use_codec(self, codec: Any) -> None:
        """Read with the provider's codec (the one ``encode`` built), not one of its own."""
        self._codec = codec

    @property
    def codec(self) -> Any:
        if self._codec is None:  # a stage on its own: its own codec, from its options
            self._codec = get_codec(self.options.codec, self.options.settings)
        return self._codec

    def reader(self, request: WireRequest, call: Call) -> CallReader:
        """One call's reading of the answer to ``request``."""
        return CallReader(self.codec, request, call, self._secrets)

    async def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, dict[str, Any]]
    ) -> AsyncIterator[StreamEvent]:
        reader = self.reader(request, call)
        try:
            async for obj in inner(request, call):
                for event in reader.read(obj):
                    yield event
                if not reader.reading:
                    break
            events = reader.finish()
        except Exception as exc:
            events, raised = reader.ended(exc)
            for event in events:
                yield event
            if raised is None:
                return
            if raised is exc:
                raise
            raise raised from raised.__cause__
        for event in events:
            yield event
