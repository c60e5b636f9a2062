"""The gateway without its web framework: a request of one of the served APIs in, its reply
(a JSON body, or a stream of bytes) out, through the same adapters and routers as a library
call (docs/gateway.md)."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio
from pydantic import ValidationError

from metis.adapter.adapter import Adapter
from metis.core.ids import new_request_id
from metis.core.raised import is_cancellation
from metis.errors import AdapterError, InvalidRequestError, ProtocolError
from metis.gateway import (
    anthropic_api,
    anthropic_write,
    chat_api,
    chat_write,
    responses_items,
)
from metis.gateway.access import ACCESS
from metis.gateway.ahead import Ahead
from metis.gateway.begun import begun, finished
from metis.gateway.call_signatures import (
    CallSignatures,
    SignatureStore,
    keep_signed,
    restore_signed,
)
from metis.gateway.config import GatewayConfig
from metis.gateway.conversations import continued, remember
from metis.gateway.errors import (
    GatewayAuthError,
    TimeLimit,
)
from metis.gateway.errors import error_reply as error_reply  # the endpoints'
from metis.gateway.frames import planned
from metis.gateway.inbound import Inbound
from metis.gateway.item_ids import given_ids
from metis.gateway.keys import KeyState, given_keys
from metis.gateway.metrics import Metrics
from metis.gateway.models import ModelTable, Target
from metis.gateway.prepared import Prepared
from metis.gateway.projection import lone_instructions, project
from metis.gateway.reported import dropped_headers as dropped_headers  # the endpoints'
from metis.gateway.reported import log_dropped as log_dropped
from metis.gateway.reported import warnings_of
from metis.gateway.responses_read import read_responses
from metis.gateway.server_fit import ServerTools
from metis.gateway.spent import Spent, cut_usage, output_chars, spent_by, streamed_model
from metis.gateway.sse import BlockWriter, new_id
from metis.gateway.store import Owner, RedisResponseStore, ResponseStore
from metis.gateway.stream_writers import answer_parts, ending
from metis.model.content import Message, Role
from metis.model.events import MessageComplete, MessageStart, StreamEvent
from metis.model.response import CanonicalResponse, StopKind, TokenUsage

T = TypeVar("T")
FAILED_ENDINGS = frozenset({StopKind.ERROR, StopKind.CANCELLED})
"""The stop reasons of a stream that failed (what arrived, completed before its error)."""
log = logging.getLogger("metis.gateway")


@dataclass(slots=True)
class JsonResult:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class StreamResult:
    """A stream to send: its bytes, its headers, the time (``anyio.current_time()``) it must
    end by and the limit that set it, and the bytes that end it when it does not."""

    chunks: AsyncIterator[bytes]
    headers: dict[str, str]
    deadline: float
    limit: TimeLimit
    failed: Callable[[AdapterError], bytes]
    ended: Callable[[], bool] = lambda: False
    """Whether the stream made its own end already (its last event, or its own error event,
    counted where it was made): a cut that comes as it goes out is not counted again."""


READERS: dict[str, Callable[..., Inbound]] = {
    "anthropic": anthropic_api.read_messages,
    "chat": chat_api.read_chat,
    "responses": read_responses,
}


class Gateway:
    def __init__(self, config: GatewayConfig) -> None:
        self.settings, self.tracer = config.settings, config.tracer
        self.time_limit = TimeLimit(config.settings.request_timeout_seconds)
        self.api_key, self.metrics_key = config.api_key, config.metrics_key
        self.keys = config.keys
        self.models = ModelTable(config.registry, suggest=not config.keys.restrict_models())
        self.stored: ResponseStore | RedisResponseStore = ResponseStore(
            config.settings.stored_responses
        )
        self.metrics = Metrics()
        self.server_tools = ServerTools()
        self.signatures: SignatureStore = CallSignatures()

    async def aclose(self) -> None:
        await self.models.aclose()

    def authenticate(self, headers: Mapping[str, str]) -> KeyState | None:
        """The client's key, as ``x-api-key`` or ``Authorization: Bearer`` (both APIs' forms):
        the simple key (None) or one of ``gateway.keys`` (its state). A client sending both
        (an SDK given a provider's key and the gateway's token) is served by the one that
        is a key of this gateway, ``x-api-key`` first."""
        if self.api_key is None and not self.keys:
            return None
        sent = given_keys(headers)
        for given in sent:
            if not given:
                continue
            if self.api_key and hmac.compare_digest(given.encode(), self.api_key.encode()):
                return None
            found = self.keys.find(given)
            if found is not None:
                if (line := ACCESS.get()) is not None:
                    line.key = found.spec.name
                return found
        if not any(sent):
            raise GatewayAuthError(
                "no API key was sent: send this gateway's key as x-api-key or Authorization: Bearer"
            )
        raise GatewayAuthError(
            "the API key sent is not a key of this gateway (a provider's own key is not one): "
            "send the key this gateway's operator gave you"
        )

    async def prepare(
        self, api: str, body: Any, owner: Owner, found: Target | None = None
    ) -> Prepared:
        """``owner``: the key asking (metis.gateway.store.owner_of), whose stored responses
        alone a ``previous_response_id`` may name; ``found``: the target already looked up
        for the body's model, if any (used when it is the model the reader read)."""
        stored, ids = None, None
        if api == "responses":
            body, stored = await continued(self.stored, body, owner)
        try:
            inbound = READERS[api](body, later=True)
        except ValidationError as exc:
            raise InvalidRequestError(f"invalid request: {exc.errors()[0]['msg']}") from None
        if api == "responses":
            ids = given_ids(stored.ids if stored is not None else None, body.get("input"))
        if stored is not None:
            inbound.messages = [*stored.messages, *inbound.messages]
        # a call sent back without its signature (every Messages and Responses client, and a
        # Chat client that strips extra_content) is given the one kept under its id
        inbound.messages = await restore_signed(self.signatures, owner, inbound.messages)
        target = found if found is not None and found.name == inbound.model else None
        target = target or self.models.resolve(inbound.model)
        own: dict[str, Any] = lone_instructions(inbound) if api != "anthropic" else {}
        if isinstance(target.chat_model, Adapter):  # decided as the adapter would (no copy)
            own["stream"] = inbound.stream and target.chat_model.capabilities.supports_streaming
        caps, frame = target.capabilities, inbound.frame  # a frame kept: metis.gateway.frames
        if frame is None:
            limit, changes, dropped = project(inbound, caps, target.wire_model)
            if inbound.fields.get("server_tools"):
                changes["server_tools"] = await self.server_tools.fitted(inbound, target, dropped)
        try:
            if frame is None:
                request = inbound.request(target.request_model, limit, **changes, **own)
            else:
                request, dropped = planned(inbound, target, own)
        except ValidationError as exc:
            raise InvalidRequestError(f"invalid request: {exc.errors()[0]['msg']}") from None
        return Prepared(inbound, target, request, dropped, owner, ids=ids)

    # Answering ----------------------------------------------------------------------------------

    async def complete(
        self, api: str, prepared: Prepared, key: KeyState | None = None
    ) -> JsonResult:
        if key is not None:
            await self.keys.admit(key, prepared.inbound.model)
        response, spent = None, Spent()
        try:
            with anyio.fail_after(self.settings.request_timeout_seconds):
                response = await prepared.target.chat_model.complete(prepared.request)
            spent.model, spent.usage = spent_by(response)
        except TimeoutError:
            self._cut(prepared, spent)
            raise self.time_limit.exceeded() from None
        except BaseException as exc:
            if is_cancellation(exc):  # the client gone: never free (docs/gateway.md)
                self._cut(prepared, spent)
            raise
        finally:
            if key is not None:
                await self.keys.release(key, spent.model, spent.usage)
        return await self.answered(api, prepared, response)

    def _cut(self, prepared: Prepared, spent: Spent) -> None:
        """A whole reply cut by the deadline or the client before it came: its input
        estimated (its output never seen), counted in the metrics and told in ``spent``."""
        request = prepared.request
        spent.model, spent.usage = request.model, cut_usage(prepared.target.chat_model, request, 0)
        self.metrics.usage(spent.model, spent.usage)

    async def answered(
        self, api: str, prepared: Prepared, response: CanonicalResponse
    ) -> JsonResult:
        """A model's whole answer, counted, kept (Responses) and written in the caller's API."""
        charged, used = spent_by(response)
        if charged is not None and used is not None:
            self.metrics.usage(charged, used)
        elapsed = time.monotonic() - prepared.started
        self.metrics.request(api, prepared.inbound.model, 200, elapsed)
        reported = prepared.reported + warnings_of(response)
        model = prepared.inbound.model
        await keep_signed(self.signatures, prepared.owner, response.message.content)
        if api == "anthropic":
            body = anthropic_write.write_message(response, model)
        elif api == "chat":
            legacy = bool(prepared.inbound.options.get("legacy_functions"))
            body = chat_write.write_completion(response, model, legacy)
        else:
            response_id = new_id("resp_")
            output = responses_items.reply_items(response, prepared.inbound, response_id)
            body = responses_items.response_object(
                prepared.inbound, model, response_id, output, response.stop_reason, response.usage
            )
            await remember(self.stored, prepared, response.message, body)
        return JsonResult(200, body, dropped_headers(reported))

    async def stream(
        self, api: str, prepared: Prepared, key: KeyState | None = None
    ) -> StreamResult:
        """The stream's first event is awaited here, so a call that fails before it is an
        error reply with its status; one that fails later ends the stream with the API's own
        error event."""
        if key is not None:
            await self.keys.admit(key, prepared.inbound.model)
        events = aiter(prepared.target.chat_model.stream(prepared.request))
        deadline = anyio.current_time() + self.settings.request_timeout_seconds
        ahead = Ahead(partial(answer_parts, api, prepared))  # while the upstream thinks
        try:
            first = await next_by(events, deadline, self.time_limit)
        except BaseException:
            ahead.cancel()
            await aclose_shielded(events)
            if key is not None:
                await self.keys.release(key, None, None)
            raise
        writer, response_id, headers = ahead.made()
        chunks = await begun(self._chunks(api, prepared, events, first, writer, response_id, key))
        if isinstance(first, MessageStart) and (early := warnings_of(first)):
            headers.update(dropped_headers([*prepared.reported, *early]))
        failed = ending(api, prepared, writer)
        return StreamResult(chunks, headers, deadline, self.time_limit, failed, failed.ended)

    async def _chunks(
        self,
        api: str,
        prepared: Prepared,
        events: AsyncIterator[StreamEvent],
        first: StreamEvent | None,
        writer: BlockWriter,
        response_id: str,
        key: KeyState | None = None,
        spent: Spent | None = None,
        priced: str | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """The stream's bytes; the deadline is kept by whoever sends them (one cancel scope
        for the whole stream, not one per event). What it spent: charged to ``key``, and
        told in ``spent``; cut before its usage came, an estimate (``priced`` as that model:
        a route's that answered)."""
        used: tuple[str | None, TokenUsage | None] = (None, None)
        end: MessageComplete | None = None  # written once the stream is over, not before
        streamed = 0  # characters of output: what a stream cut before its usage is charged
        following = events.__anext__  # (not anext(events, None): a wrapper an event)
        try:
            item = first
            while item is not None:
                if end is not None:  # an event after the end (a stage's): the end goes first
                    yield await self._end(api, prepared, writer, end, response_id)
                    end = None
                if item.__class__ is MessageComplete:
                    charged = streamed_model(prepared.request.model, item)
                    used = (charged, item.usage)
                    self.metrics.usage(charged, item.usage)
                    if item.warnings:
                        log_dropped(prepared, warnings_of(item))
                    end = item
                else:
                    streamed += output_chars(item)
                    yield writer.feed(item)
                try:
                    item = await following()
                except StopAsyncIteration:
                    break
            if end is not None:
                yield await self._end(api, prepared, writer, end, response_id)
        except AdapterError as exc:
            self.metrics.error(api, exc)
            failed = error_reply(api, exc, prepared.request.request_id)
            writer.ended = True
            yield writer.error(failed.status, failed.body)
        finally:
            elapsed = time.monotonic() - prepared.started
            self.metrics.request(api, prepared.inbound.model, 200, elapsed)
            await aclose_shielded(events)
            await self._settle(prepared, used, (streamed, priced), key, spent)

    async def _settle(
        self,
        prepared: Prepared,
        used: tuple[str | None, TokenUsage | None],
        cut: tuple[int, str | None],
        key: KeyState | None,
        spent: Spent | None,
    ) -> None:
        """A stream's spending charged to ``key`` and told in ``spent``; a stream cut before
        its usage came is charged an estimate from ``cut``, the characters it streamed and
        the model to price it as, never nothing (docs/gateway.md)."""
        if used[1] is None:
            streamed, priced = cut
            used = (
                priced or prepared.request.model,
                cut_usage(prepared.target.chat_model, prepared.request, streamed),
            )
            self.metrics.usage(*used)
        if spent is not None:
            spent.model, spent.usage = used
        if key is not None:
            await self.keys.release(key, *used)

    async def _end(
        self,
        api: str,
        prepared: Prepared,
        writer: BlockWriter,
        end: MessageComplete,
        response_id: str,
    ) -> bytes:
        """A stream's last event, written once nothing came after it (a stage of the stack
        may still fail the stream as it ends: then the stream ends with its error event
        alone), its reply kept with the ``response`` object it ended with (Responses). A
        stream cut short ends with its error event, not a normal end: the library raises
        the error after this ending, so one that ends here never came."""
        if end.stop_reason.kind in FAILED_ENDINGS:
            raise ProtocolError("the stream ended with an error")
        # its signatures kept before the client is told of the calls
        await keep_signed(self.signatures, prepared.owner, end.final_content)
        written = writer.feed(end)
        final = getattr(writer, "final", None) if response_id else None
        if final is not None:
            reply = Message(role=Role.ASSISTANT, content=end.final_content)
            await remember(self.stored, prepared, reply, final)
        return written


async def next_by(events: AsyncIterator[T], deadline: float, limit: TimeLimit) -> T | None:
    """The stream's next event (None at its end) within the request's deadline, which
    ``limit`` set (a scope of that deadline: no clock read, no context manager of anyio's
    around it)."""
    with anyio.CancelScope(deadline=deadline):
        try:
            return await anext(events)
        except StopAsyncIteration:
            return None
    raise limit.exceeded()  # the scope caught its own cancellation: the deadline


async def aclose_shielded(events: AsyncIterator[Any]) -> None:
    """``events`` closed, shielded from a cancellation, unless it has ended already."""
    closer = getattr(events, "aclose", None)
    if closer is not None and not finished(events):
        with anyio.CancelScope(shield=True):
            await closer()


def request_id() -> str:
    return new_request_id()
