"""The pass-through path (docs/gateway.md "Pass-through"): a request whose API is the routed
model's own (Anthropic Messages to an ``anthropic`` stack, Chat Completions to an ``openai``
one, Responses to an ``openai_responses`` one) is sent as the caller wrote it, every field
kept, and answered with the provider's own bytes, through :mod:`metis.gateway.relay`.

What the gateway owns is still done here: the key (its models, limits and budget, charged
from the usage the answer reports), the model name (the alias or id the caller gave becomes
the provider's name, and the answer names the caller's), the output limit (lowered to the
model's), thinking signed with its maker, a Responses conversation served from its own store
(:mod:`metis.gateway.passthrough_responses`), the deadline, the metrics, and errors in the
gateway's shape with the provider's secrets hidden. The call itself is
:mod:`metis.gateway.passthrough_call`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from metis.adapter.adapter import Adapter
from metis.errors import AdapterError, ErrorClass, ProtocolError
from metis.gateway.hidden import shown
from metis.gateway.inbound import whole_number
from metis.gateway.keys import KeyState
from metis.gateway.models import Target
from metis.gateway.passthrough_call import (
    CODECS,
    Passing,
    Upstream,
    answered_error,
    classified,
    ended,
    in_time,
    own_thinking,
    searches,
    speaks,
)
from metis.gateway.passthrough_responses import converse, remember
from metis.gateway.projection import MIN_THINKING_BUDGET
from metis.gateway.provenance import maker
from metis.gateway.relay import AnthropicRelay, ChatRelay, Relay
from metis.gateway.relay_responses import ResponsesRelay
from metis.gateway.server_written import responses_written_in, written_in
from metis.gateway.service import Gateway, JsonResult, StreamResult, dropped_headers, error_reply
from metis.gateway.spent import passed_cut_usage
from metis.gateway.sse import data, event
from metis.gateway.store import Owner, whose
from metis.model.response import TokenUsage
from metis.pipeline.call import Call
from metis.transport.exchange import Exchange
from metis.wire.framing.objects import MAX_WHOLE_BODY
from metis.wire.openai_responses.errors import pending_error

log = logging.getLogger("metis.gateway")
EVENTS = "text/event-stream"
PATH_HEADER = "x-metis-path"
"""``pass-through`` or ``translated``: which way the gateway answered."""
MAX_ERROR_BODY = 1 << 20
"""The most read of a stream's answer that is not events, to find the error object it is."""
LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
"""Each API's output limit."""


class PassThrough:
    """Decides which requests pass through, and sends them."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.upstream = Upstream(gateway.settings.request_timeout_seconds)

    def plan(self, api: str, body: Any, raw: bytes, owner: Owner) -> Passing | None:
        """The request's pass-through, or None when it goes the translated way. ``owner``:
        the key asking (metis.gateway.store.owner_of)."""
        return self.planned(api, body, raw, owner)[0]

    def planned(
        self, api: str, body: Any, raw: bytes, owner: Owner
    ) -> tuple[Passing | None, Target | None]:
        """:meth:`plan`, and the target it found for the body's model (None when it looked
        none up): the translated way is given it, not looking the model up again."""
        if not self.gateway.settings.pass_through or api not in CODECS:
            return None, None
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return None, None
        if not isinstance(body.get("stream", False), bool):
            return None, None  # the translated reader says what is wrong with it
        if not isinstance(body.get("previous_response_id", ""), str):
            return None, None
        if api == "responses" and not isinstance(body.get("input", ""), str | list):
            return None, None
        target = self.gateway.models.resolve(body["model"])
        if not isinstance(target.chat_model, Adapter):  # a route: metis.gateway.routed
            return None, target
        return self.plan_for(api, body, raw, target, target.chat_model, owner), target

    def plan_for(
        self,
        api: str,
        body: dict[str, Any],
        raw: bytes,
        target: Target,
        adapter: Adapter,
        owner: Owner,
    ) -> Passing | None:
        """The request's pass-through to ``adapter`` (``target``'s model), or None when it
        does not speak ``api`` or the request holds another model's thinking."""
        if not speaks(adapter, api):
            return None
        if b"metis" in raw and (written_in if api == "anthropic" else responses_written_in)(body):
            return None  # server blocks or items the gateway wrote: the provider opens its own
        if api == "chat" and b"web_search_options" in raw and not searches(body, adapter, target):
            return None  # a model that does not search refuses it: the translated path says so
        made_by = maker(adapter.name, target.request_model)
        if b"metis1." in raw and not own_thinking(body, made_by):
            return None  # another model's thinking: the translated path leaves it out
        streamed = body.get("stream") is True
        passing = Passing(api, target, adapter, dict(body), streamed, made_by, owner)
        passing.body["model"] = adapter.wire_model(target.request_model)
        self._limit(passing)
        if passing.reported:
            self._log(passing)
        return passing

    def _log(self, passing: Passing) -> None:
        log.warning(
            "left out of the request for %s%s: %s",
            passing.target.name,
            whose(passing.owner),
            "; ".join(passing.reported),
            extra={"event": "metis.gateway.dropped", "model": passing.target.name},
        )

    def _limit(self, passing: Passing) -> None:
        most = passing.target.capabilities.max_output_tokens
        for key in LIMITS:
            asked = whole_number(passing.body.get(key))
            if asked is not None and asked > most:
                passing.body[key] = most
                passing.reported.append(f"{key} lowered from {asked} to {most}")
        thinking, limit = passing.body.get("thinking"), whole_number(passing.body.get("max_tokens"))
        if not isinstance(thinking, dict) or limit is None:
            return
        budget = whole_number(thinking.get("budget_tokens"))
        if budget is not None and budget >= limit > MIN_THINKING_BUDGET:
            passing.body["thinking"] = {**thinking, "budget_tokens": limit - 1}
            passing.reported.append(f"thinking budget lowered from {budget} to {limit - 1}")

    async def converse(self, passing: Passing) -> None:
        """A Responses request's conversation, from the gateway's store (before the key is
        admitted: an id it does not hold is refused at once)."""
        if passing.api != "responses":
            return
        before = len(passing.reported)
        passing.conversation = await converse(
            passing.body, passing.adapter, self.gateway.stored, passing.reported, passing.owner
        )
        if len(passing.reported) > before:
            self._log(passing)

    # Answering --------------------------------------------------------------------------------

    def _relay(self, passing: Passing) -> Relay:
        model = passing.target.name
        if passing.api == "anthropic":
            return AnthropicRelay(model, passing.made_by)
        if passing.api == "responses":
            return ResponsesRelay(model, passing.conversation.previous)
        options = passing.body.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        return ChatRelay(model, asked)

    def headers(self, passing: Passing, streamed: bool) -> dict[str, str]:
        headers = {PATH_HEADER: "pass-through", **dropped_headers(passing.reported)}
        if streamed:
            headers.update({"content-type": "text/event-stream", "cache-control": "no-cache"})
        return headers

    async def complete(
        self, passing: Passing, headers: Mapping[str, str], key: KeyState | None
    ) -> JsonResult:
        await self.converse(passing)
        if key is not None:
            await self.gateway.keys.admit(key, passing.target.name)
        try:
            body = await self.whole(passing, headers)
        finally:
            await self.settle(passing, key)
        return JsonResult(200, body, self.headers(passing, False))

    async def whole(self, passing: Passing, headers: Mapping[str, str]) -> bytes:
        """The call sent and its whole answer relayed (the relay left in ``passing``)."""
        relay = passing.relay = self._relay(passing)
        exchange, call = await self.upstream.open(passing, headers)
        try:
            raw = await exchange.body(MAX_WHOLE_BODY)  # as every reply read whole
        except Exception as exc:
            error = exchange.translate(exc)
            if isinstance(error, AdapterError):
                error = passing.error = classified(in_time(error, call, passing.limit), call)
            raise error from exc
        finally:
            await exchange.aclose()
        if (failure := answered_error(passing, raw, call)) is not None:
            raise failure
        try:
            answer = relay.whole(raw)
        except (ValueError, RecursionError):
            msg = f"{call.provider} answered with a body that is not JSON"
            raise ProtocolError(msg, provider=call.provider) from None
        if isinstance(relay, ResponsesRelay) and (pending := pending_error(relay.final or {})):
            passing.error = classified(pending, call)  # not an answer: not kept, not served
            raise passing.error
        return answer

    async def stream(
        self, passing: Passing, headers: Mapping[str, str], key: KeyState | None
    ) -> StreamResult:
        await self.converse(passing)
        if key is not None:
            await self.gateway.keys.admit(key, passing.target.name)
        try:  # the first bytes are awaited: a failure before them is a reply with its status
            chunks = await self.opened(passing, headers)
            first = await anext(chunks, b"")
        except BaseException:
            await self.settle(passing, key)
            raise
        return StreamResult(
            self._settled(passing, first, chunks, key),
            self.headers(passing, True),
            passing.call.deadline,  # type: ignore[union-attr]
            passing.limit,  # type: ignore[arg-type]
            lambda error: self.error_bytes(passing, error),
            lambda: self.ended(passing),
        )

    async def opened(self, passing: Passing, headers: Mapping[str, str]) -> AsyncIterator[bytes]:
        """The call sent and its stream open: its bytes, relayed, to come."""
        relay = passing.relay = self._relay(passing)
        exchange, call = await self.upstream.open(passing, headers)
        kind = (exchange.content_type or EVENTS).split(";")[0].strip().lower()
        if kind != EVENTS:  # an answer the caller's SDK could not read as a stream
            passing.opened = False  # refused: counted with its status (metis.gateway.app)
            said = f"{call.provider} answered a stream with {kind[:100]}, not events"
            failure = await self._not_events(passing, exchange, call)
            passing.error = failure or classified(ProtocolError(said, provider=call.provider), call)
            raise passing.error
        return self._chunks(passing, relay, exchange)

    async def _not_events(
        self, passing: Passing, exchange: Exchange, call: Call
    ) -> AdapterError | None:
        """The error object a stream was answered with instead (a JSON body of at most
        :data:`MAX_ERROR_BODY`), classified; None for any other answer."""
        try:
            raw = await exchange.body(MAX_ERROR_BODY)
        except Exception:  # too large, or cut: not an error object the caller could be told
            return None
        finally:
            await exchange.aclose()
        return answered_error(passing, raw, call)

    def ended(self, passing: Passing) -> bool:
        """Whether the stream made its own end (the provider's, or the gateway's error event)."""
        return passing.error is not None or (passing.relay is not None and passing.relay.finished)

    def error_bytes(self, passing: Passing, error: AdapterError) -> bytes:
        request_id = passing.call.request_id if passing.call is not None else ""
        failed = error_reply(passing.api, error, request_id)
        if passing.api == "anthropic":
            return event("error", failed.body)
        if isinstance(passing.relay, ResponsesRelay):
            code = failed.body["error"].get("code") or failed.body["error"]["type"]
            return passing.relay.failure(str(code), shown(error))
        return data(failed.body)

    async def _chunks(
        self, passing: Passing, relay: Relay, exchange: Exchange
    ) -> AsyncIterator[bytes]:
        relayed = False
        try:
            while (chunk := await exchange.read()) is not None:
                exchange.clock.received = True
                if out := relay.feed(chunk):
                    relayed = True
                    yield out
            if out := relay.end():
                relayed = True
                yield out
            if not relay.finished:
                said = f"{passing.adapter.name} ended the stream before its last event"
                raise ProtocolError(said, provider=passing.adapter.name)
        except Exception as exc:
            error = exchange.translate(exc)
            if not isinstance(error, AdapterError):
                raise
            assert passing.call is not None
            passing.error = classified(in_time(error, passing.call, passing.limit), passing.call)
            error = passing.error
            if not relayed:  # nothing sent yet: refused, with its status (metis.gateway.app)
                passing.opened = False
                raise error from None
            self.gateway.metrics.error(passing.api, error)
            yield self.error_bytes(passing, error)
        finally:
            await exchange.aclose()

    async def _settled(
        self, passing: Passing, first: bytes, chunks: AsyncIterator[bytes], key: KeyState | None
    ) -> AsyncIterator[bytes]:
        try:
            yield first
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
            await self.settle(passing, key)

    async def settle(self, passing: Passing, key: KeyState | None) -> TokenUsage | None:
        """The request is over: its metrics, its telemetry, its conversation kept, and its key
        charged what the provider reported (a stream cut before it reported any: an
        estimate of its input)."""
        gateway, charged, relay = self.gateway, passing.target.request_model, passing.relay
        elapsed = time.monotonic() - passing.started
        usage = relay.usage if relay is not None else None
        try:
            if relay is not None:
                if relay.failed is not None:
                    gateway.metrics.error(passing.api, relay.failed)
                if usage is None and cut_short(passing, relay):
                    usage = passed_cut_usage(charged, passing.body)
                if usage is not None:
                    gateway.metrics.usage(charged, usage)
                if passing.call is not None:
                    passing.adapter.telemetry.emit(ended(passing, relay, elapsed))
                if isinstance(relay, ResponsesRelay) and passing.error is None:
                    await remember(passing.conversation, relay, gateway.stored)
        finally:  # a store that failed or a cancelled request still gives the key its place
            if passing.opened:  # a refused call is counted with its status (metis.gateway.app)
                gateway.metrics.request(passing.api, passing.target.name, 200, elapsed)
            if key is not None:
                await gateway.keys.release(key, charged, usage)
        return usage


def cut_short(passing: Passing, relay: Relay) -> bool:
    """Whether a passed-through stream the provider accepted ended before its provider said
    how (no stop, no error event): cut by the deadline, the client gone, or the connection
    dropped (a failure of another class, a reply it could not read, is the provider's)."""
    error = passing.error
    cut = error is None or error.error_class is ErrorClass.NETWORK
    return passing.stream and passing.opened and cut and not relay.finished
