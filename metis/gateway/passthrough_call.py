"""The upstream call of a passed-through request (docs/gateway.md "Pass-through"): the request
as the caller wrote it, the model renamed, sent the way every request to the provider goes
(the URL and headers its codec gives, its auth flow, the transport's exchange with its
deadlines and redirect policy), but not through the library's stages: no retries, no tool-id
store, no cache policy. Its telemetry is the library's (the client span, the log)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from metis.adapter.adapter import Adapter
from metis.core.ids import new_request_id
from metis.errors import AdapterError, ProtocolError, scrub_error
from metis.gateway.errors import TimeLimit, carry_param
from metis.gateway.models import Target
from metis.gateway.provenance import same_maker, unwrap
from metis.gateway.reasoning_items import REDACTED
from metis.gateway.relay import Relay
from metis.model.content import Message, ProviderRaw
from metis.model.request import CanonicalRequest
from metis.model.response import TokenUsage
from metis.pipeline.call import Call, DropRecord
from metis.pipeline.registry import stages
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.stages.control.attempt_record import call_identity
from metis.telemetry.events import CallCompleted, CallFailed, CallStarted
from metis.transport.exchange import Exchange
from metis.wire.builder import MessageBuilder
from metis.wire.json_limits import loads

CODECS = {"anthropic": "anthropic", "chat": "openai_chat", "responses": "openai_responses"}
"""The caller's API -> the codec of the stacks that speak it upstream."""
PATHS = {"anthropic": "/messages", "chat": "/chat/completions", "responses": "/responses"}
FORWARDED = ("anthropic-beta",)
"""The caller's headers sent on: the features it asked of the provider."""
HTTP_TRANSPORT = "transport"
"""The one transport a request is passed through on (not a WebSocket's)."""


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
    owner: str = ""
    """The key whose Responses conversations it may continue (metis.gateway.store)."""
    reported: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    call: Call | None = None
    """The upstream call, once it is sent (its telemetry reported when it ends)."""
    limit: TimeLimit | None = None
    """What set the call's deadline (the gateway's timeout or the adapter's, the shorter)."""
    error: AdapterError | None = None
    conversation: Any = None
    """A Responses request's conversation (:mod:`metis.gateway.passthrough_responses`)."""
    relay: Relay | None = None
    """The answer's relay, once the call is sent."""
    opened: bool = False
    """The provider took the call (it answers 200): the request is counted where it ends."""


def speaks(adapter: Adapter, api: str) -> bool:
    """Whether ``adapter`` sends ``api``'s requests over HTTP with built-in stages only: a
    request of that API may pass through to it."""
    provider = adapter.pipeline.provider
    if provider is None or provider.codec_name != CODECS.get(api):
        return False
    if not all(stages.is_builtin(stage.name) for stage in adapter.pipeline.stages):
        return False  # a stage of the application's own (a redaction, say) sees every request
    return getattr(provider.part("transport"), "name", None) == HTTP_TRANSPORT


def searches(body: dict[str, Any], adapter: Adapter, target: Target) -> bool:
    """Whether a Chat request's ``web_search_options`` may pass through to the model as it
    came. Where the stack maps web search (metis/wire/openai_chat/server_tools.py), only to a
    model that searches: Perplexity, or one of OpenAI's search models (any other refuses it:
    "Web search options not supported with this model"). A stack that maps none passes it on
    for its provider to take or refuse (OpenRouter takes it), as any field of its own API."""
    if body.get("web_search_options") is None:
        return True
    if "web_search" not in target.capabilities.server_tools:
        return True
    return adapter.name == "perplexity" or "search" in adapter.wire_model(target.request_model)


class Upstream:
    """Opens passed-through calls; keeps each model's URL and headers."""

    def __init__(self, request_timeout_seconds: float) -> None:
        self.request_timeout_seconds = request_timeout_seconds
        self._heads: dict[tuple[int, str, bool], tuple[str, dict[str, str]]] = {}
        self._limits: dict[str, TimeLimit] = {}  # per adapter

    async def head(self, passing: Passing, call: Call) -> tuple[str, dict[str, str]]:
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

    def _limit(self, adapter: str, adapter_seconds: float) -> TimeLimit:
        """The shorter of the gateway's timeout and ``adapter``'s, named by its setting."""
        if adapter not in self._limits:
            gateway = self.request_timeout_seconds
            self._limits[adapter] = (
                TimeLimit(gateway)
                if gateway <= adapter_seconds
                else TimeLimit(adapter_seconds, f"adapters.{adapter}.timeout_seconds")
            )
        return self._limits[adapter]

    async def addressed(
        self, passing: Passing, headers: Mapping[str, str]
    ) -> tuple[Call, str, dict[str, str]]:
        """A passed-through request's call (due within the gateway's and the adapter's
        timeouts), its model endpoint's URL and the headers it is sent with (the adapter's,
        and the client's that are forwarded)."""
        adapter = passing.adapter
        limit = passing.limit = self._limit(adapter.name, adapter.config.timeout_seconds)
        seconds = limit.seconds
        call = Call(
            request_id=new_request_id(),
            provider=adapter.name,
            model=passing.target.request_model,
            wire_model=passing.body["model"],
            deadline=anyio.current_time() + seconds,
            drops=DropRecord(secrets=adapter.endpoint.secrets),
        )
        url, sent = await self.head(passing, call)
        return call, url, {**sent, **{k: headers[k] for k in FORWARDED if k in headers}}

    async def open(self, passing: Passing, headers: Mapping[str, str]) -> tuple[Exchange, Call]:
        """The call sent, its answer's exchange open; a refusal raised classified."""
        adapter = passing.adapter
        provider = adapter.pipeline.provider
        assert provider is not None
        call, url, sent = await self.addressed(passing, headers)
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
            exchange = await transport.open(wire, call)  # type: ignore[union-attr]
        except HTTPFailure as failure:
            if failure.status == 401:
                provider.refused(wire)
            error = provider.codec.error_from_http(failure.status, failure.headers, failure.body)
            passing.error = classified(refused_field(passing, error, failure.body), call)
            raise passing.error from None
        except AdapterError as error:
            passing.error = classified(in_time(error, call, passing.limit), call)
            raise passing.error from None
        passing.opened = True
        return exchange, call


def ended(passing: Passing, relay: Relay, elapsed: float) -> CallCompleted | CallFailed:
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


def own_thinking(body: dict[str, Any], made_by: ProviderRaw) -> bool:
    """Whether every thinking block the gateway signed is ``made_by``'s, with a signature to
    give back (one its maker gave none the provider refuses: the translated path leaves it
    out); those are given back their provider's own signature (in place), the others are
    left as they are."""
    found: list[tuple[dict[str, Any], str, str, Any]] = []
    for block in _thinking_parts(body):
        kind = block.get("type")
        key = {"thinking": "signature", "redacted_thinking": "data"}.get(str(kind))
        key = "encrypted_content" if kind == "reasoning" else key
        if key is not None and isinstance(block.get(key), str):
            maker, opaque = unwrap(block[key].removeprefix(REDACTED))
            if maker is not None and (not opaque or not same_maker(maker, made_by)):
                return False
            if maker is not None:
                found.append((block, key, opaque, maker.data.get("id")))
    for block, key, opaque, item_id in found:
        block[key] = opaque
        if item_id is not None and block.get("type") == "reasoning":
            block["id"] = item_id  # the provider's own id, where the gateway gave out its own
    return True


def _thinking_parts(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The parts of a request that may hold thinking: the blocks of the Messages API's
    messages, the Responses API's input items (its reasoning items carry it)."""
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        yield from (b for b in content if isinstance(b, dict)) if isinstance(content, list) else ()
    items = body.get("input")
    yield from (item for item in items if isinstance(item, dict)) if isinstance(items, list) else ()


def in_time(error: AdapterError, call: Call, limit: TimeLimit | None) -> AdapterError:
    """``error``, or the gateway's timeout when the call failed because it ran out of the
    request's deadline, which ``limit`` set (the transport says that as a network error)."""
    if limit is not None and call.deadline is not None and anyio.current_time() >= call.deadline:
        return limit.exceeded()
    return error


def answered_error(passing: Passing, raw: bytes, call: Call) -> AdapterError | None:
    """The error a JSON answer with status 200 is, when it is an error object where a reply
    was expected (a proxy's, a compatible server's), classified as a library call reads it
    (docs/contract.md section 4: by its type, or the status it says it is); None for a reply,
    or a body that is not JSON."""
    if b'"error"' not in raw:
        return None
    try:
        obj = loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if passing.api == "anthropic":
        refused = obj.get("type") == "error"
    else:  # an error object, not a reply that carries one (a failed response is relayed)
        refused = bool(obj.get("error")) and "choices" not in obj and "output" not in obj
    provider = passing.adapter.pipeline.provider
    if not refused or provider is None:
        return None
    try:
        provider.codec.parse_body(obj, MessageBuilder(call.provider, call.model))
    except AdapterError as error:
        return classified(carry_param(error, obj), call)
    return None


def refused_field(passing: Passing, error: AdapterError, raw: bytes) -> AdapterError:
    """``error``, with the field the provider's refusal names, for an OpenAI-API client."""
    if passing.api == "anthropic" or b'"param"' not in raw:
        return error
    try:
        return carry_param(error, loads(raw))
    except (ValueError, RecursionError):
        return error


def classified(error: AdapterError, call: Call) -> AdapterError:
    error.provider = error.provider or call.provider
    error.request_id = error.request_id or call.request_id
    scrub_error(error, call.secrets)
    return error
