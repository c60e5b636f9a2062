"""encode: the canonical request becomes the provider's HTTP request, via its codec."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.dialect import rules_name
from metis.pipeline.stage import Inner, Stage
from metis.pipeline.wire import WireRequest
from metis.providers.codec import get_codec


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

    def __call__(
        self, request: CanonicalRequest, call: Call, inner: Inner[WireRequest, Any]
    ) -> Any:
        wire = WireRequest(
            url=call.endpoint.url(stream=bool(request.stream), model=call.wire_model),
            body=self.codec.encode(request, call),
            headers=call.endpoint.request_headers(),
            stream=bool(request.stream),
        )
        return inner(wire, call)
