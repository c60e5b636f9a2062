"""The pass-through path (docs/gateway.md "Pass-through"): a request whose API is the routed
model's own (Anthropic Messages to an ``anthropic`` stack, Chat Completions to an ``openai``
one) is sent as the caller wrote it, every field kept, and answered with the provider's own
bytes, through :mod:`metis.gateway.relay`.

What the gateway owns is still done here: the key (its models, limits and budget, charged
from the usage the answer reports), the model name (the alias or id the caller gave becomes
the provider's name, and the answer names the caller's), the output limit (lowered to the
model's), thinking signed with its maker, the deadline, the metrics, and errors in the
gateway's shape with the provider's secrets hidden. The request goes the way every request
to the provider goes (its auth flow, the transport's exchange with its deadlines and redirect
policy), but not through the library's stages: no retries, no tool-id store, no cache policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from metis.adapter.adapter import Adapter
from metis.core.ids import new_request_id
from metis.errors import AdapterError, ProtocolError, scrub_error
from metis.gateway.errors import GatewayTimeoutError
from metis.gateway.keys import KeyState
from metis.gateway.models import Target
from metis.gateway.projection import MIN_THINKING_BUDGET
from metis.gateway.provenance import unwrap
from metis.gateway.relay import AnthropicRelay, ChatRelay, Relay
from metis.gateway.service import Gateway, JsonResult, StreamResult, dropped_headers, error_reply
from metis.gateway.sse import data, event
from metis.model.content import Message, ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.response import TokenUsage
from metis.pipeline.call import Call, DropRecord
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.stages.control.telemetry import call_identity
from metis.telemetry.events import CallCompleted, CallFailed, CallStarted
from metis.transport.exchange import Exchange

log = logging.getLogger("metis.gateway")
CODECS = {"anthropic": "anthropic", "chat": "openai_chat"}
"""The caller's API -> the codec of the stacks that speak it upstream."""
PATHS = {"anthropic": "/messages", "chat": "/chat/completions"}
FORWARDED = ("anthropic-beta",)
"""The caller's headers sent on: the features it asked of the provider."""
PATH_HEADER = "x-metis-path"
"""``pass-through`` or ``translated``: which way the gateway answered."""


@dataclass(slots=True)
class Passing:
    """A request going through as it came: its body (the model renamed) and what the relay
    needs."""

    api: str
    target: Target
    adapter: Adapter
    body: dict[str, Any]
    stream: bool
    made_by: ProviderRaw
    reported: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    call: Call | None = None
    """The upstream call, once it is sent (its telemetry reported when it ends)."""
    error: AdapterError | None = None


class PassThrough:
    """Decides which requests pass through, and sends them."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._heads: dict[tuple[int, str, bool], tuple[str, dict[str, str]]] = {}

    def plan(self, api: str, body: Any, raw: bytes) -> Passing | None:
        """The request's pass-through, or None when it goes the translated way."""
        if not self.gateway.settings.pass_through or api not in CODECS:
            return None
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return None
        if not isinstance(body.get("stream", False), bool):
            return None  # the translated reader says what is wrong with it
        target = self.gateway.models.resolve(body["model"])
        adapter = target.chat_model
        if not isinstance(adapter, Adapter):  # a route: the answering model is not known yet
            return None
        provider = adapter.pipeline.provider
        if provider is None or provider.codec_name != CODECS[api]:
            return None
        made_by = ProviderRaw(provider=adapter.name, model=target.request_model)
        if b"metis1." in raw and not _own_thinking(body, made_by):
            return None  # another model's thinking: the translated path leaves it out
        passing = Passing(api, target, adapter, dict(body), body.get("stream") is True, made_by)
        passing.body["model"] = adapter.wire_model(target.request_model)
        self._limit(passing)
        if passing.reported:
            log.warning(
                "left out of the request for %s: %s",
                target.name,
                "; ".join(passing.reported),
                extra={"event": "metis.gateway.dropped", "model": target.name},
            )
        return passing

    def _limit(self, passing: Passing) -> None:
        most = passing.target.capabilities.max_output_tokens
        for key in ("max_tokens", "max_completion_tokens"):
            asked = passing.body.get(key)
            if isinstance(asked, int) and not isinstance(asked, bool) and asked > most:
                passing.body[key] = most
                passing.reported.append(f"{key} lowered from {asked} to {most}")
        thinking, limit = passing.body.get("thinking"), passing.body.get("max_tokens")
        if not isinstance(thinking, dict) or not isinstance(limit, int):
            return
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and budget >= limit > MIN_THINKING_BUDGET:
            passing.body["thinking"] = {**thinking, "budget_tokens": limit - 1}
            passing.reported.append(f"thinking budget lowered from {budget} to {limit - 1}")

    # Sending ----------------------------------------------------------------------------------

    async def _head(self, passing: Passing, call: Call) -> tuple[str, dict[str, str]]:
        """The URL and headers the adapter sends this model's requests with (its codec's, as
        a library call has them before its auth flow), worked out once per model."""
        adapter, stream = passing.adapter, passing.stream
        found = (id(adapter), call.wire_model, stream)
        if found not in self._heads:
            provider = adapter.pipeline.provider
            assert provider is not None
            probe = CanonicalRequest(
                model=passing.target.request_model,
                messages=[Message.user(".")],
                max_output_tokens=1,
                stream=stream,
            )
            encode = provider.part("encode")
            assert encode is not None
            wire = await adapter.pipeline.prepare(probe, call, through=encode)
            if not wire.url.endswith(PATHS[passing.api]):
                raise ProtocolError(f"{adapter.name} does not serve {PATHS[passing.api]}")
            self._heads[found] = (wire.url, dict(wire.headers))
        return self._heads[found]

    async def _open(self, passing: Passing, headers: Mapping[str, str]) -> tuple[Exchange, Call]:
        adapter = passing.adapter
        provider = adapter.pipeline.provider
        assert provider is not None
        seconds = min(self.gateway.settings.request_timeout_seconds, adapter.config.timeout_seconds)
        call = Call(
            request_id=new_request_id(),
            provider=adapter.name,
            model=passing.target.request_model,
            wire_model=passing.body["model"],
            deadline=anyio.current_time() + seconds,
            drops=DropRecord(secrets=adapter.endpoint.secrets),
        )
        url, sent = await self._head(passing, call)
        sent = {**sent, **{k: headers[k] for k in FORWARDED if k in headers}}
        if passing.api == "chat" and passing.stream:
            options = passing.body.get("stream_options")
            passing.body["stream_options"] = {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            }
        wire = WireRequest(url, passing.body, sent, stream=passing.stream).serialized()
        transport = provider.part("transport")
        passing.call = call
        adapter.telemetry.emit(CallStarted(**call_identity(call, 0), stream=passing.stream))
        try:
            wire = await provider.authenticate(wire, call)
            return await transport.open(wire, call), call  # type: ignore[union-attr]
        except HTTPFailure as failure:
            error = provider.codec.error_from_http(failure.status, failure.headers, failure.body)
            passing.error = _classified(error, call)
            raise passing.error from None
        except AdapterError as error:
            passing.error = _classified(error, call)
            raise passing.error from None

    # Answering --------------------------------------------------------------------------------

    def _relay(self, passing: Passing) -> Relay:
        model = passing.target.name
        if passing.api == "anthropic":
            return AnthropicRelay(model, passing.made_by)
        options = passing.body.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        return ChatRelay(model, asked)

    def _headers(self, passing: Passing, streamed: bool) -> dict[str, str]:
        headers = {PATH_HEADER: "pass-through", **dropped_headers(passing.reported)}
        if streamed:
            headers.update({"content-type": "text/event-stream", "cache-control": "no-cache"})
        return headers

    async def complete(
        self, passing: Passing, headers: Mapping[str, str], key: KeyState | None
    ) -> JsonResult:
        gateway, relay = self.gateway, self._relay(passing)
        if key is not None:
            await gateway.keys.admit(key, passing.target.name)
        try:
            exchange, call = await self._open(passing, headers)
            try:
                raw = await exchange.body()
            except Exception as exc:
                error = exchange.translate(exc)
                if isinstance(error, AdapterError):
                    passing.error = _classified(error, call)
                raise error from exc
            finally:
                await exchange.aclose()
            try:
                body = relay.whole(raw)
            except (ValueError, RecursionError):
                msg = f"{call.provider} answered with a body that is not JSON"
                raise ProtocolError(msg, provider=call.provider) from None
        finally:
            await self._settle(passing, relay, key)
        return JsonResult(200, body, self._headers(passing, False))

    async def stream(
        self, passing: Passing, headers: Mapping[str, str], key: KeyState | None
    ) -> StreamResult:
        gateway, relay = self.gateway, self._relay(passing)
        if key is not None:
            await gateway.keys.admit(key, passing.target.name)
        try:
            exchange, call = await self._open(passing, headers)
        except BaseException:
            if passing.call is not None:
                elapsed = time.monotonic() - passing.started
                passing.adapter.telemetry.emit(_ended(passing, relay, elapsed))
            if key is not None:
                await gateway.keys.release(key, None, None)
            raise
        chunks = self._chunks(passing, relay, exchange, call, key)

        def timed_out() -> bytes:
            late = GatewayTimeoutError("the request took longer than the gateway allows")
            return self._error_bytes(passing, late, call)

        return StreamResult(chunks, self._headers(passing, True), call.deadline, timed_out)

    def _error_bytes(self, passing: Passing, error: AdapterError, call: Call) -> bytes:
        failed = error_reply(passing.api, error, call.request_id)
        return event("error", failed.body) if passing.api == "anthropic" else data(failed.body)

    async def _chunks(
        self, passing: Passing, relay: Relay, exchange: Exchange, call: Call, key: Any
    ) -> AsyncIterator[bytes]:
        try:
            while (chunk := await exchange.read()) is not None:
                exchange.clock.received = True
                if out := relay.feed(chunk):
                    yield out
            if out := relay.end():
                yield out
        except Exception as exc:
            error = exchange.translate(exc)
            if not isinstance(error, AdapterError):
                raise
            passing.error = _classified(error, call)
            self.gateway.metrics.error(passing.api, error.error_class.value)
            yield self._error_bytes(passing, error, call)
        finally:
            await exchange.aclose()
            await self._settle(passing, relay, key)

    async def _settle(self, passing: Passing, relay: Relay, key: KeyState | None) -> None:
        """The request is over: its metrics, and its key charged what the provider reported."""
        gateway, charged = self.gateway, passing.target.request_model
        if relay.failed is not None:
            gateway.metrics.error(passing.api, relay.failed)
        if relay.usage is not None:
            gateway.metrics.usage(charged, relay.usage)
        elapsed = time.monotonic() - passing.started
        gateway.metrics.request(passing.api, passing.target.name, 200, elapsed)
        if passing.call is not None:
            passing.adapter.telemetry.emit(_ended(passing, relay, elapsed))
        if key is not None:
            await gateway.keys.release(key, charged, relay.usage)


def _ended(passing: Passing, relay: Relay, elapsed: float) -> CallCompleted | CallFailed:
    """The call's end for the adapter's telemetry (the library's client span, its log)."""
    assert passing.call is not None
    identity, latency = call_identity(passing.call, 0), int(elapsed * 1000)
    error = passing.error
    if error is None and relay.failed is None and relay.stop is not None:
        usage = relay.usage or TokenUsage()
        return CallCompleted(
            **identity,
            latency_ms=latency,
            usage=usage,
            stop_reason=relay.stop,
            message_id=None,
            response_model=passing.body["model"],
        )
    if error is not None:
        kind, message, status = error.error_class.value, error.message, error.provider_status
    elif relay.failed is not None:
        kind, message, status = relay.failed, f"the stream ended with {relay.failed}", None
    else:
        kind, message, status = "cancelled", "the caller went away", None
    return CallFailed(
        **identity,
        latency_ms=latency,
        error_class=kind,
        error_message=message,
        provider_status=status,
        retryable=False,
        usage=relay.usage,
    )


def _own_thinking(body: dict[str, Any], made_by: ProviderRaw) -> bool:
    """Whether every thinking block the gateway signed is ``made_by``'s; those are given back
    their provider's own signature (in place), the others are left as they are."""
    found: list[tuple[dict[str, Any], str, str]] = []
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            kind = block.get("type") if isinstance(block, dict) else None
            key = {"thinking": "signature", "redacted_thinking": "data"}.get(str(kind))
            if key is None or not isinstance(block.get(key), str):
                continue
            maker, opaque = unwrap(block[key])
            if maker is None:
                continue
            if maker != made_by:
                return False
            found.append((block, key, opaque))
    for block, key, opaque in found:
        block[key] = opaque
    return True


def _classified(error: AdapterError, call: Call) -> AdapterError:
    error.provider = error.provider or call.provider
    error.request_id = error.request_id or call.request_id
    scrub_error(error, call.secrets)
    return error
