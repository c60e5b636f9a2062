"""encode: the canonical request becomes the provider's HTTP request, via its codec.

The stage owns the adapter's one codec instance (built from the stack's ``codec:`` and
``codec_settings:``, shaped by the adapter's settings where the codec takes them, as
Ollama's does); the provider hands the same instance to ``normalize``, ``continuation`` and
``count_tokens`` (docs/engine.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from metis.errors import StackError
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call, DropRecord
from metis.pipeline.endpoint import Endpoint
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Transform
from metis.stages.options import CodecOptions, codec_dialect
from metis.wire.cache_points import requested_cache
from metis.wire.codec import get_codec, rules_name
from metis.wire.encoded_messages import made_fresh
from metis.wire.knobs import OptionTarget, apply_provider_options, fit_request
from metis.wire.opaque import without_foreign

CALLERS_SETTINGS: dict[str, Any] = {
    "tool_choice": None,
    "parallel_tool_calls": None,
    "stop_sequences": [],
    "temperature": None,
    "top_p": None,
    "top_k": None,
    "seed": None,
    "frequency_penalty": None,
    "presence_penalty": None,
    "output_schema": None,
    "thinking": None,
    "provider_options": {},
    "compaction": None,
}
"""The settings of a request a caller may make or leave out, as a request without them has
them; what stays is what every request holds (the messages, the tools, the output limit)."""


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
        self._services = StageServices()
        self._dialect = rules_name(self.options.codec, self.options.settings)
        self.fresh_wire = False
        """Set when an application's own stage follows: each body made anew, none shared
        (metis/wire/encoded_messages.py)."""

    def bind(self, services: StageServices) -> None:
        """Where requests go; a codec shaped by the adapter's settings (Ollama's) gets them;
        what each model takes of the request's knobs, and the names its options reach it by."""
        self._endpoint = services.require_endpoint(self.name)
        self._services = services
        for_adapter = getattr(self._built, "for_adapter", None)
        if for_adapter is not None:
            self.codec = for_adapter(services.settings.as_mapping(), services.capabilities_for)

    def rewrite(self, request: CanonicalRequest, call: Call) -> WireRequest:
        endpoint = self._endpoint
        if endpoint is None:
            raise StackError("stage 'encode' has no endpoint: an adapter gives it one")
        stream = bool(request.stream)
        caps = self._services.capabilities_for(call.wire_model)
        request = fit_request(without_foreign(request, call), caps, call, self._dialect)
        if request.compaction is not None and not getattr(self.codec, "supports_compaction", False):
            call.warn_dropped("compaction", f"{call.provider} does not compact conversations")
            request = request.model_copy(update={"compaction": None})
        headers = endpoint.request_headers()
        if self.fresh_wire:
            with made_fresh():
                body = self.codec.encode(request, call)
        else:
            body = self.codec.encode(request, call)
        headers_for = getattr(self.codec, "headers_for", None)  # what the body needs (betas)
        if headers_for is not None:
            headers = _joined(headers, headers_for(body))
        target = apply_provider_options(
            request,
            {call.provider, *self._services.option_keys},
            OptionTarget(
                body=body,
                headers=headers,
                url=endpoint.url(stream=stream, model=call.wire_model),
            ),
            call.provider,
        )
        return WireRequest(
            url=target.url,
            body=target.body,
            headers=target.headers,
            stream=stream,
            cache=requested_cache(request, call),
            unasked=functools.partial(self._unasked, request, call),
        )

    def _unasked(self, request: CanonicalRequest, call: Call) -> dict[str, Any] | None:
        """The body of ``request`` without the caller's settings (:data:`CALLERS_SETTINGS`,
        and no provider options), its drops kept apart from the call's; None when the codec
        cannot encode it so."""
        bare = request.model_copy(update=CALLERS_SETTINGS)
        apart = dataclasses.replace(call, drops=DropRecord(secrets=call.secrets))
        try:
            body: dict[str, Any] = self.codec.encode(bare, apart)
        except Exception:  # only a report depends on it: the drop is then reported as before
            return None
        return body


def _joined(headers: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """``headers`` with ``extra``'s values added, a list header's values comma-joined."""
    if not extra:
        return headers
    out = dict(headers)
    for name, value in extra.items():
        given = next((k for k in out if k.lower() == name.lower()), None)
        out[given or name] = f"{out[given]},{value}" if given else value
    return out
