"""continuation: a session that stays on the Responses API sends only what is new.

OpenAI keeps each reply (``store: true``) and takes ``previous_response_id`` in place of the
conversation up to and including that reply. This stage, just after ``encode``, remembers per
(session, provider, model) the last reply's id and a fingerprint of every input item that reply
covers: the items its request sent, then the items its own content becomes when sent back (the
codec's ``output_items``). When the next request's ``input`` starts with exactly those items,
they are dropped and ``previous_response_id`` names the reply instead; otherwise, or with no
session, ``store: false`` or nothing new to send, the whole transcript goes as encoded.

The check is on the wire items, not the canonical messages, because they are what OpenAI
holds: after ``tool_ids`` and ``thinking_filter`` the canonical history maps item for item onto
them, so an equal prefix means an equal conversation, whatever happened in between. A session
that went to another provider and came back still matches the last reply made here (the turns
made elsewhere are new items after it), and that is correct; a history edited anywhere in the
covered part, or a reply whose blocks lost what ties them to their items, does not match, and
is sent whole.

Only a completed reply advances the state, when its ``message.complete`` passes: a call that
fails (even after that), is cancelled or abandoned before it leaves the state as it was, and
retries happen inside this stage, so only the attempt that answered counts. If OpenAI no longer
has the reply (expired, deleted), the stage forgets it and sends the request again, whole, once.
Any state kept is a consistent pair (reply id, exactly what it covers), so a stale one can only
cost a longer request, never a wrong conversation. The memory is a bounded LRU in the
process; a deployment whose turns land on different workers gets no continuation for a turn
served elsewhere, never a wrong one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field

from metis.errors import AdapterError, ErrorClass, StackError
from metis.model.content import ContentBlock
from metis.model.events import MessageComplete, StreamEvent
from metis.model.response import StopKind
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import Inner, Stage
from metis.wire.codec import get_codec

log = logging.getLogger("metis")

Key = tuple[str, str, str]


class ContinuationCodec(Protocol):
    def output_items(self, content: list[ContentBlock], call: Call) -> list[dict[str, Any]]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Covered:
    """What one stored reply stands for: its first ``count`` input items, by ``digest``."""

    response_id: str
    count: int
    digest: bytes


class ContinuationMemory:
    """The last reply per (session, provider, model), most recently used ``max_entries``."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Key, Covered] = OrderedDict()

    def get(self, key: Key) -> Covered | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: Key, covered: Covered) -> None:
        self._entries[key] = covered
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget(self, key: Key) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


class Continuation(Stage[WireRequest, WireRequest, StreamEvent, StreamEvent]):
    """A wire edit that is also a call wrapper (it may send the call twice). It reads
    items with the provider's codec, the one ``encode`` built."""

    name = "continuation"
    role = "edit"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        enabled: bool = True
        connection_local: bool = Field(
            default=False,
            description="continue with store: false too: the transport keeps the last reply "
            "on its connection (WebSocket mode, docs/websocket.md)",
        )
        max_entries: int = Field(default=10_000, ge=1, description="sessions x models kept")
        codec: str = Field(
            default="openai_responses",
            description="whose items to fingerprint, for the stage on its own (in a stack: "
            "the provider's codec)",
        )

    options: Options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._codec: ContinuationCodec | None = None
        self.use_codec(get_codec(self.options.codec))  # a plain codec: its one instance
        self.memory = ContinuationMemory(self.options.max_entries)
        """Cross-call state by design (bounded); everything per call stays local."""

    def use_codec(self, codec: Any) -> None:
        """Read items with the provider's codec (the one ``encode`` built)."""
        if not callable(getattr(codec, "output_items", None)):
            raise StackError(
                f"stage 'continuation': codec {getattr(codec, 'name', codec)!r} has no output_items"
            )
        self._codec = cast(ContinuationCodec, codec)

    @property
    def codec(self) -> ContinuationCodec:
        assert self._codec is not None
        return self._codec

    def __call__(
        self, request: WireRequest, call: Call, inner: Inner[WireRequest, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        items = request.body.get("input")
        if (
            not self.options.enabled
            or not call.session_id
            or (request.body.get("store") is False and not self.options.connection_local)
            or not isinstance(items, list)
        ):  # nothing to continue: no frame of this stage on the way
            return inner(request, call)
        return self._continued(request, call, inner, items)

    async def _continued(
        self,
        request: WireRequest,
        call: Call,
        inner: Inner[WireRequest, StreamEvent],
        items: list[Any],
    ) -> AsyncIterator[StreamEvent]:
        assert call.session_id is not None
        key: Key = (call.session_id, call.provider, call.model)
        previous = self.memory.get(key)
        hasher = hashlib.sha256()
        sent = request
        for i, item in enumerate(items):
            if previous is not None and i == previous.count and hasher.digest() == previous.digest:
                body = {
                    **request.body,
                    "previous_response_id": previous.response_id,
                    "input": items[i:],
                }
                sent = dataclasses.replace(request, body=body, full_input=items)
            hasher.update(_fingerprint(item))

        attempts = [sent] if sent is request else [sent, request]
        for attempt in attempts:
            yielded = False
            try:
                async for event in inner(attempt, call):
                    if isinstance(event, MessageComplete):
                        # Now, not once the caller has read it: stages outside rewrite the
                        # event (tool_ids gives it canonical ids), and a caller may stop here.
                        self._remember(key, len(items), hasher.copy(), event, call)
                    yielded = True
                    yield event
                return
            except AdapterError as error:
                self._restore(key, previous)  # a failed call never advances the state
                if yielded or attempt is request or not _reply_gone(error):
                    raise
                self.memory.forget(key)
                previous = None
                log.info(
                    "continuation: %s no longer has reply %s; sending the whole transcript",
                    call.provider,
                    attempt.body["previous_response_id"],
                    extra={"session_id": call.session_id, "request_id": call.request_id},
                )

    def _remember(
        self, key: Key, count: int, hasher: Any, event: MessageComplete, call: Call
    ) -> None:
        """The reply covers the request's ``count`` items (already in ``hasher``) and what
        its content becomes when sent back; a reply that did not complete covers nothing."""
        if event.stop_reason.kind in _UNFINISHED or not event.message_id:
            return
        reply = self.codec.output_items(event.final_content, call)
        for item in reply:
            hasher.update(_fingerprint(item))
        self.memory.put(key, Covered(event.message_id, count + len(reply), hasher.digest()))

    def _restore(self, key: Key, previous: Covered | None) -> None:
        if previous is None:
            self.memory.forget(key)
        else:
            self.memory.put(key, previous)


_UNFINISHED = (StopKind.ERROR, StopKind.CANCELLED)


def _fingerprint(item: Any) -> bytes:
    """One item's bytes for the running hash, with a separator no JSON text contains. A lone
    surrogate is hashed as it is (the transport refuses such a request, classified)."""
    text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass") + b"\x1e"


def _reply_gone(error: AdapterError) -> bool:
    """OpenAI's answer to a previous_response_id it does not have (any more)."""
    if error.error_class is not ErrorClass.INVALID_REQUEST:
        return False
    message = (error.provider_message or "").lower()
    return error.provider_code == "previous_response_not_found" or "previous response" in message
