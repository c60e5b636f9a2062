"""encode: the canonical request becomes the provider's HTTP request, via its codec."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.errors import StackError
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.stacks.dialect import rules_name
from metis.stacks.loader import Endpoint
from metis.wire.codec import get_codec


class Encode(Stage[CanonicalRequest, WireRequest, Any, Any]):
    name = "encode"

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
        self._endpoint: Endpoint | None = None

    def bind(self, services: StageServices) -> None:
        """Where requests go; a codec shaped by the adapter's options (Ollama's) gets them."""
        self._endpoint = services.require_endpoint(self.name)
        for_adapter = getattr(self.codec, "for_adapter", None)
        if for_adapter is not None:
            self.codec = for_adapter(services.config.options, services.capabilities_for)

    def __call__(
        self, request: CanonicalRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> Any:
        endpoint = self._endpoint
        if endpoint is None:
            raise StackError("stage 'encode' has no endpoint: an adapter gives it one")
        wire = WireRequest(
            url=endpoint.url(stream=bool(request.stream), model=call.wire_model),
            body=self.codec.encode(request, call),
            headers=endpoint.request_headers(),
            stream=bool(request.stream),
        )
        return inner(wire, call)
