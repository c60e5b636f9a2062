"""encode: the canonical request becomes the provider's HTTP request, via its codec.

The stage owns the adapter's one codec instance (built from the stack's ``codec:`` and
``codec_settings:``, shaped by the adapter's settings where the codec takes them, as
Ollama's does); the provider hands the same instance to ``normalize``, ``continuation`` and
``count_tokens`` (docs/engine.md).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.errors import StackError
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.endpoint import Endpoint
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Transform
from metis.wire.cache_points import requested_cache
from metis.wire.codec import get_codec, rules_name
from metis.wire.opaque import without_foreign


class CodecOptions(BaseModel):
    """The options of a stage that works through the codec: its name and settings (both
    filled in from the stack's ``codec:`` and ``codec_settings:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    codec: str
    settings: dict[str, Any] = Field(default_factory=dict)


def codec_dialect(options: dict[str, Any]) -> str | None:
    """The dialect a codec stage's options name (a configured codec's own name)."""
    codec, settings = options.get("codec"), options.get("settings")
    if not isinstance(codec, str):
        return None
    return rules_name(codec, settings if isinstance(settings, dict) else None)


class Encode(Transform[CanonicalRequest, WireRequest]):
    name = "encode"
    role = "encode"
    dialect_option = "codec"
    Options = CodecOptions

    options: CodecOptions

    @classmethod
    def dialect(cls, options: dict[str, Any]) -> str | None:
        return codec_dialect(options)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._built = get_codec(self.options.codec, self.options.settings)
        self.codec: Any = self._built
        """The adapter's codec: the one built from the stack, shaped by the adapter."""
        self._endpoint: Endpoint | None = None

    def bind(self, services: StageServices) -> None:
        """Where requests go; a codec shaped by the adapter's settings (Ollama's) gets them."""
        self._endpoint = services.require_endpoint(self.name)
        for_adapter = getattr(self._built, "for_adapter", None)
        if for_adapter is not None:
            self.codec = for_adapter(services.settings.as_mapping(), services.capabilities_for)

    def rewrite(self, request: CanonicalRequest, call: Call) -> WireRequest:
        endpoint = self._endpoint
        if endpoint is None:
            raise StackError("stage 'encode' has no endpoint: an adapter gives it one")
        stream = bool(request.stream)
        return WireRequest(
            url=endpoint.url(stream=stream, model=call.wire_model),
            body=self.codec.encode(without_foreign(request, call), call),
            headers=endpoint.request_headers(),
            stream=stream,
            cache=requested_cache(request),
        )
