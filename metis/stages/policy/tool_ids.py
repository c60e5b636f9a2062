"""tool_ids: canonical tool ids outside, the provider's own ids inside (docs/contract.md §6).

On the way in, every canonical id in the history becomes the id this provider knows it by: the
one it issued, if the session's store remembers it, else one derived from the canonical id, so
a history from another provider is always consistent with itself. On the way out, every id the
provider issues gets a fresh canonical ``tu_<ulid>``, and the pairs are remembered for the
session when the message completes.

The store is never worth an answer: each store call runs within the call's cancel and
deadline, and when one fails or is cut off the call goes on with derived ids and the reply
whole. A failure (not a cancel) is reported once: a WARN record and a
``metis.tool_id_store_failed`` bus event. A cancel that cuts the write at ``message.complete``
short ends the call as cancelled, as ``cancel()`` answered True: the message keeps all its
content and its stop reason says ``cancelled`` (docs/contract.md §2).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TypeVar

import anyio

from metis.core.ids import derive_provider_tool_id, new_tool_id
from metis.core.raised import is_stray_cancel
from metis.errors import (
    AdapterError,
    CancelledError,
    ErrorClass,
    NetworkError,
    ProtocolError,
    StackError,
    redact,
)
from metis.model.content import ContentBlock, Message, ToolResultBlock, ToolUseBlock
from metis.model.events import (
    MessageComplete,
    StreamEvent,
    TextDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.history import History
from metis.model.memo import MessageMemo
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind, StopReason
from metis.model.updated import updated
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.services import StageServices
from metis.pipeline.stores import ToolIdStore
from metis.stages.options import ToolIdsOptions
from metis.stages.policy.tool_names import NameRule, given_names, provider_names, renamed
from metis.telemetry.sink import NULL_SINK, TelemetrySink

log = logging.getLogger("metis")

T = TypeVar("T")


class ToolIds(EventHook[CanonicalRequest]):
    """A hook that spans the call: ``open`` maps the history's ids to the provider's on
    the way in; its watch maps the reply's ids back and writes the new pairs to the store."""

    name = "tool_ids"

    Options = ToolIdsOptions

    options: ToolIdsOptions
    _store: ToolIdStore | None = None
    _sink: TelemetrySink = NULL_SINK

    @functools.cached_property
    def _names(self) -> NameRule:
        return NameRule.of(self.options.names)

    def bind(self, services: StageServices) -> None:
        self._store = services.tool_ids
        self._sink = services.telemetry

    def _store_or_fail(self) -> ToolIdStore:
        if self._store is None:
            raise StackError(
                "stage 'tool_ids' has no tool-id store: an adapter gives it one when it builds "
                "its pipeline (or bind it yourself: stage.bind(StageServices(tool_ids=...)))"
            )
        return self._store

    async def open(self, request: CanonicalRequest, call: Call) -> tuple[CanonicalRequest, Watch]:
        """The history with the provider's ids, and the watch that gives the reply's ids
        canonical ones (and remembers the pairs at ``message.complete``)."""
        given = call.history(request.messages).tool_ids
        request = _distinct_calls(request, call.history(request.messages))
        outward = await self._provider_ids(request, call)
        if outward:
            request = _rewrite_history(request, outward, call.history(request.messages))
        inward = {pid: cid for cid, pid in outward.items() if cid in given}
        names = provider_names(request, call.history(request.messages), self._names)
        if names:
            request = renamed(request, names, call.history(request.messages))
        return request, _Mapping(self, call, inward, {sent: name for name, sent in names.items()})

    async def _provider_ids(self, request: CanonicalRequest, call: Call) -> dict[str, str]:
        canonical = set(call.history(request.messages).tool_ids)
        if not canonical:
            return {}
        known: dict[str, str] | None = {}
        prefix, limit, space = self.rule(call)
        if call.session_id and self.options.reuse_issued_ids:
            store = self._store_or_fail()
            read = partial(_known_ids, store, call.session_id, space, canonical)
            known = await _store_call(call, self._sink, "read", read)
        known = known or {}
        return {
            cid: known.get(cid) or derive_provider_tool_id(cid, prefix, limit) for cid in canonical
        }

    def rule(self, call: Call) -> tuple[str, int, str]:
        """The prefix and length limit of the ids for this call's model, and the name the
        store keeps them under: a model with a rule of its own (``models``) has its ids kept
        apart from the provider's others, so no id another model issued reaches it."""
        options = self.options
        keys = [key for key in options.models if call.wire_model.startswith(key)]
        if not keys:
            return options.prefix, options.max_length, call.provider
        key = max(keys, key=len)
        rule = options.models[key]
        return rule.prefix, rule.max_length, f"{call.provider}:{key}"


class _Mapping(Watch):
    """One call's id mapping: each provider id the reply issues gets a canonical one.
    Events belong to the stage that made them: one with an id to map is passed on anew."""

    __slots__ = ("call", "inward", "issued", "names", "stage", "started")
    kinds = (ToolUseStart, ToolUseInputDelta, ToolUseEnd, MessageComplete)

    def __init__(
        self, stage: ToolIds, call: Call, inward: dict[str, str], names: dict[str, str]
    ) -> None:
        self.stage, self.call, self.inward = stage, call, inward
        self.names = names  # the name a tool was sent under -> the name the application gave
        self.issued: dict[str, str] = {}  # provider id -> canonical id of its latest start
        self.started: list[tuple[str, str]] = []  # (provider id, canonical id), in order

    def event(self, event: StreamEvent) -> StreamEvent:
        if event.__class__ is TextDelta:
            return event
        if isinstance(event, ToolUseInputDelta | ToolUseEnd):
            cid = self.issued.get(event.tool_use_id)
            if cid is not None and cid != event.tool_use_id:
                if event.__class__ is ToolUseInputDelta:  # every fragment: made directly
                    return ToolUseInputDelta(event.content_block_index, cid, event.partial_json)
                return replace(event, tool_use_id=cid)
        elif isinstance(event, ToolUseStart):
            pid = event.tool_use_id
            self.issued[pid] = cid = _canonical_id(pid, self.inward, self.started)
            self.started.append((pid, cid))
            name = self.names.get(event.tool_name, event.tool_name)
            return replace(event, tool_use_id=cid, tool_name=name)
        elif isinstance(event, MessageComplete):
            content = _canonical_content(event.final_content, self.started, self.inward)
            if self.names:
                content = given_names(content, self.names)
            return replace(event, final_content=content)
        return event

    async def completed(self, event: MessageComplete) -> MessageComplete | None:
        """The pairs of this reply, remembered for the session. A cancel that cut the write
        short ends the call as cancelled, as ``cancel()`` answered True."""
        call, started = self.call, self.started
        if call.session_id and started:
            pairs = {c: p for p, c in started}
            store = self.stage._store_or_fail()
            space = self.stage.rule(call)[2]
            remember = partial(store.remember, call.session_id, space)
            await _store_call(call, self.stage._sink, "write", partial(remember, pairs))
            if call.cancel.cancelled:  # cancel() said True: the stream ends cancelled
                return replace(event, stop_reason=StopReason(kind=StopKind.CANCELLED))
        return None


_REWRITTEN: MessageMemo[Message] = MessageMemo()
"""A message's copy with the provider's ids: a conversation's next call finds the copy it sent
before, the same object, so the encoder's memo finds its wire form."""


def _rewrite_history(
    request: CanonicalRequest, ids: dict[str, str], history: History
) -> CanonicalRequest:
    """``request`` with the provider's ids: the copies are kept on the history's record under
    the ids they map to, so the same history with the same ids is rewritten in one look-up."""
    key = ("tool_ids", frozenset(ids.items()))
    rewritten = history.kept(key, partial(_rewritten, request.messages, ids, history))
    return updated(request, messages=list(rewritten))


def _rewritten(
    messages: list[Message], ids: dict[str, str], history: History
) -> tuple[Message, ...]:
    out = list(messages)
    for i in history.tools_at:
        message = out[i]
        key = tuple(ids[cid] for cid in history.facts[i].tool_ids)
        copied = _REWRITTEN.get(message, key)
        if copied is None:
            content = [_with_provider_id(block, ids) for block in message.content]
            copied = _REWRITTEN.put(message, key, updated(message, content=content))
        out[i] = copied
    return tuple(out)


REPEAT = "~"
"""Joins a canonical id used again by a later call to its count, the id that call is sent as."""


def _distinct_calls(request: CanonicalRequest, history: History) -> CanonicalRequest:
    """``request`` with each call that reuses an earlier message's call id (an imported history
    numbering its calls per turn, a provider that does) and the results after it under an id
    of their own, ``<id>~<n>``, from which the provider id is derived: Anthropic refuses a
    request whose ``tool_use`` ids repeat, and a provider reading a repeated id cannot tell
    which call a result answers."""
    renamed = history.kept(("tool_ids", "repeats"), partial(_renamed, request.messages, history))
    if not renamed:
        return request
    messages = list(request.messages)
    for i, message in renamed.items():
        messages[i] = message
    return updated(request, messages=messages)


def _renamed(messages: list[Message], history: History) -> dict[int, Message]:
    seen: set[str] = set()
    current: dict[str, str] = {}  # a repeated id -> what its latest call is sent as
    counts: dict[str, int] = {}
    out: dict[int, Message] = {}
    for i in history.tools_at:
        mine: set[str] = set()
        content: list[ContentBlock] = []
        for block in messages[i].content:
            if isinstance(block, ToolUseBlock):
                if block.id in seen and block.id not in mine:
                    counts[block.id] = counts.get(block.id, 0) + 1
                    current[block.id] = f"{block.id}{REPEAT}{counts[block.id]}"
                mine.add(block.id)
                if block.id in current:
                    block = updated(block, id=current[block.id])
            elif isinstance(block, ToolResultBlock) and block.tool_use_id in current:
                block = updated(block, tool_use_id=current[block.tool_use_id])
            content.append(block)
        seen |= mine
        if any(a is not b for a, b in zip(content, messages[i].content, strict=True)):
            out[i] = updated(messages[i], content=content)
    return out


def _with_provider_id(block: ContentBlock, ids: dict[str, str]) -> ContentBlock:
    if isinstance(block, ToolUseBlock):
        return updated(block, id=ids[block.id])
    if isinstance(block, ToolResultBlock):
        return updated(block, tool_use_id=ids[block.tool_use_id])
    return block


def _canonical_content(
    content: list[ContentBlock], started: list[tuple[str, str]], inward: dict[str, str]
) -> list[ContentBlock]:
    """``content`` with canonical tool ids. Tool calls are matched to their ``tool.use_start``
    in order, so a provider id used twice still names two calls; a call no start announced gets
    a canonical id too (added to ``started``), so no provider id reaches the application."""
    out: list[ContentBlock] = []
    position = 0
    for block in content:
        if isinstance(block, ToolUseBlock):
            if position < len(started) and started[position][0] == block.id:
                cid = started[position][1]
                position += 1
            else:
                known = next((c for p, c in started if p == block.id), None)
                if known is None:
                    known = _canonical_id(block.id, inward, started)
                    started.append((block.id, known))
                cid = known
            block = block.model_copy(update={"id": cid})
        out.append(block)
    return out


def _canonical_id(pid: str, inward: dict[str, str], started: list[tuple[str, str]]) -> str:
    """The canonical id for a call the provider names ``pid``: the history's, when the provider
    echoed an id it was sent and no call of this reply has that id yet, else a fresh one."""
    cid = inward.get(pid)
    if cid is None or any(c == cid for _, c in started):
        return new_tool_id()
    return cid


async def _known_ids(
    store: ToolIdStore, session_id: str, provider: str, canonical: set[str]
) -> dict[str, str]:
    """The store's answer, checked: a store is outside code, and a wrong id here would reach
    the provider."""
    known = await store.provider_ids(session_id, provider, canonical)
    if not isinstance(known, Mapping):
        raise ProtocolError(f"the tool-id store answered a {type(known).__name__}, not a mapping")
    return {c: p for c, p in known.items() if c in canonical and isinstance(p, str) and p}


_PAST_DEADLINE = "the tool-id store did not answer before the call's deadline"


async def _store_call(
    call: Call, sink: TelemetrySink, operation: str, action: Callable[[], Awaitable[T]]
) -> T | None:
    """``action``'s result, or None when the store failed or the call's cancel or deadline cut
    it off. A failure is reported; a cancel is the caller's choice, not the store's failure
    (an asyncio CancelledError no one cancelled the call for is the store's failure)."""
    failure: BaseException
    try:
        with call.cancel.guard(call.deadline) as scope:
            result = await action()
        if not scope.cancelled_caught:
            return result
        failure = NetworkError(_PAST_DEADLINE)
    except CancelledError:
        return None
    except BaseException as exc:
        if not isinstance(exc, Exception) and not is_stray_cancel(exc):
            raise
        if call.cancel.cancelled:
            return None  # the store turned the cancel into an error of its own
        past_deadline = anyio.current_time() >= call.deadline
        failure = NetworkError(_PAST_DEADLINE) if past_deadline else exc
    _report_store_failure(call, sink, operation, failure)
    return None


def _report_store_failure(
    call: Call, sink: TelemetrySink, operation: str, failure: BaseException
) -> None:
    if isinstance(failure, AdapterError):
        error_class, message = failure.error_class.value, failure.message
    else:
        error_class = ErrorClass.OTHER.value
        message = redact(f"{type(failure).__name__}: {failure}")
    log.warning(
        "tool-id store %s failed for %s, going on with derived tool ids: %s",
        operation,
        call.provider,
        message,
        extra={
            "event": "metis.tool_id_store_failed",
            "session_id": call.session_id,
            "request_id": call.request_id,
            "adapter": call.provider,
            "operation": operation,
            "error_class": error_class,
        },
    )
    from metis.telemetry.events import ToolIdStoreFailed  # the bus events load when first used

    event = ToolIdStoreFailed(
        request_id=call.request_id,
        session_id=call.session_id,
        provider=call.provider,
        model=call.model,
        wire_model=call.wire_model,
        retry_count=call.attempt,
        timestamp=time.time(),
        operation=operation,
        error_class=error_class,
        error_message=message,
    )
    try:
        sink.emit(event)
    except Exception:
        log.debug("telemetry sink failed on %s", event.name, exc_info=True)
