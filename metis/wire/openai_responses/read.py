"""Reading OpenAI Responses replies (``POST /v1/responses``): the stream parser and errors.

Sans-IO; every value read from the server is checked by :mod:`metis.wire.read`.

A reply is a list of output items, each announced by ``response.output_item.added`` and
closed by ``response.output_item.done``, with the item's ``output_index`` on every event in
between; the parser uses that index as the builder's key. ``message`` items give text
(``output_text`` parts), ``function_call`` items tool calls, and so do
``custom_tool_call`` items (a freeform call: its text as ``{"input": text}``, its
``response.custom_tool_call_input.delta`` pieces as that JSON's pieces; a call ends at its
input's ``.done`` event: :mod:`.calls`), ``reasoning``
items thinking: the summary text (its parts joined by a blank line) with the encrypted
content as the signature, so ``thinking_filter`` sends it back only to the model that made it.
Web search and code interpreter items, and text annotations: :mod:`.server_tools`; xAI's
server tools' calls (custom calls among them): :mod:`.xai_tools`. Every other
item (file search, MCP, image generation, compaction, ...) is kept whole as an opaque block
(docs/contract.md §8), in the form its ``.done`` event (or the final response) gives, and all
its other events are ignored.

As each item is done, its block gets the item it came from in ``provider_raw.data`` (item
``id``, a message's ``phase``, a reasoning item's summary parts, a call's ``call_id``) for a
faithful round trip, kept however the reply ends (a cancel or an error too); when the reply
completes, a reasoning item whose following item was not kept is marked ``unpaired`` (an
opaque item is kept: it goes back with the reasoning that led to it).

The final response's output is matched to the items the stream announced by item ``id``, then
by ``output_index`` (its position in ``output``) and type, so an item streamed once is never
added twice, whatever gaps the stream's indices had and even where the endpoint gives an item a
new id on every event (GitHub Copilot's); only items the stream never announced are read from
it. Events are keyed by ``output_index`` alone, never by item id.

Stop reasons (:mod:`.stop`): there is no finish reason. A ``completed`` reply stops with
``refusal`` when it refused (its refusal parts' words the stop's ``explanation``, not the
reply's text; a reply that ends otherwise keeps them as text), ``tool_use`` when it holds a
function call, else ``end_turn``, all with raw ``"completed"``, whatever other items it holds
(a dropped item never decides the stop: a reply that ends on a compaction item ends its turn
like any other); so does a whole reply that names no status at all (OpenRouter's), with raw
empty. An ``incomplete`` reply stops by
its ``incomplete_details.reason`` (``max_output_tokens`` -> ``max_tokens``, ``content_filter``
-> ``content_filter``, others provider-specific), which is also the raw string.
``response.failed`` and ``error`` events raise classified errors, as does a whole response
still ``queued`` or ``in_progress`` (background mode: :mod:`.errors`). Usage:
``input_tokens`` includes cached and cache-written tokens; canonical input is the rest. As the
recordings show, ``encrypted_content`` differs between ``.added``, ``.done`` and the final
response (a fresh encryption each time); the one on ``.done`` is kept, as clients send back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from metis.errors import ProtocolError
from metis.model.events import StreamEvent
from metis.model.response import StopReason
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses import server_tools as server
from metis.wire.openai_responses import xai_tools as xai
from metis.wire.openai_responses.calls import CALLS, INPUT_DONE, CallInputs
from metis.wire.openai_responses.custom import CUSTOM_CALL
from metis.wire.openai_responses.errors import body_error, cut_while_pending
from metis.wire.openai_responses.stop import stop_reason
from metis.wire.openai_responses.usage import read_counts
from metis.wire.read import (
    counts_of,
    list_value,
    malformed,
    object_value,
    optional_object,
    optional_text,
    required_index,
    required_object,
    required_text,
    text_value,
)

_TEXT_DELTA = "response.output_text.delta"
_DELTAS = frozenset(
    (
        _TEXT_DELTA,
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
    )
)
_CANONICAL_ITEMS = frozenset(("message", "function_call", CUSTOM_CALL, "reasoning"))
"""The output item types with a canonical form: text, a tool call, thinking."""


class _Everything(set[Any]):
    def __contains__(self, item: object) -> bool:
        return True


_EVERYTHING = _Everything()


class ResponsesParser:
    """Feeds Responses stream events (parsed SSE ``data:`` objects) to a builder."""

    __slots__ = (
        "_builder", "_calls", "_custom_tools", "_done", "_dropped", "_ids", "_items", "_refusal",
        "_server", "_tools",
    )  # fmt: skip

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._done = False
        self._items: dict[int, tuple[str, bool]] = {}  # index -> (type, done), as they came
        self._ids: dict[int, Any] = {}  # index -> item id
        self._dropped: set[Any] = set()  # indices of items outside the canonical model
        self._calls = CallInputs(builder)
        self._tools = False
        self._refusal: list[tuple[Any, str]] = []  # (item index, words): a refusal's explanation
        self._server: set[int] = set()  # indices of custom_tool_call items the server ran (xAI)
        self._custom_tools: frozenset[str] | None = None  # as the reply's tools echo says

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        builder = self._builder
        if obj.get("type") == _TEXT_DELTA:  # the hot path
            index, delta = obj.get("output_index"), obj.get("delta")
            if delta.__class__ is str and index.__class__ is int and index not in self._dropped:
                return builder.take_text(index, delta)
        self._event(obj)
        return builder.take()

    def end(self) -> Sequence[StreamEvent]:
        if not self._done:
            raise ProtocolError(cut_while_pending(self._builder.message_id))
        return self._builder.take()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        self._refused_as_text()
        self._builder.finish(reason)
        return self._builder.take()

    def _event(self, obj: dict[str, Any]) -> None:
        kind = required_text(obj, "type", "event")
        if self._done:
            return  # nothing belongs to a reply after its response.completed
        if kind.startswith("response.output_item."):
            index = required_index(obj, "output_index", kind)
            item = required_object(obj, "item", kind)
            if kind == "response.output_item.added":
                self._added(index, item)
            elif kind == "response.output_item.done":
                self._finished(index, item)
            return
        self._item_event(kind, obj)

    def _item_event(self, kind: str, obj: dict[str, Any]) -> None:
        """An event about an item's content, or about the response as a whole."""
        builder = self._builder
        index = obj.get("output_index")
        if index.__class__ is not int and (index is not None or kind in _DELTAS):
            raise malformed(f"{kind}.output_index", "a whole number", index)
        if index in self._dropped:
            return
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            builder.thinking(index, required_text(obj, "delta", kind))
        elif kind == "response.function_call_arguments.delta":
            self._calls.piece(index, "function_call", required_text(obj, "delta", kind))
        elif kind == "response.custom_tool_call_input.delta":
            self._calls.piece(index, CUSTOM_CALL, required_text(obj, "delta", kind))
        elif kind in INPUT_DONE:
            call, field = INPUT_DONE[kind]
            if isinstance(index, int) and self._items.get(index, ("", False))[0] == call:
                self._calls.done(index, call, obj.get(field))
        elif kind == "response.reasoning_summary_part.added":
            if obj.get("summary_index") and builder.has_block(index):
                builder.thinking(index, "\n\n")
        elif kind == _TEXT_DELTA:  # reached only when the hot path refused it
            builder.text(index, required_text(obj, "delta", kind))
        elif kind == "response.output_text.annotation.added":
            annotation = required_object(obj, "annotation", kind)
            found = server.citation(annotation)
            if found is None:
                server.unread(builder, annotation)
            elif builder.has_block(index):
                builder.citation(index, found)
        elif kind == "response.refusal.delta":
            self._refusal.append((index, required_text(obj, "delta", kind)))
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            response = required_object(obj, "response", kind)
            builder.start(*_identity(response))
            self._custom_tools = xai.declared_custom_tools(response)
        elif kind in ("response.completed", "response.incomplete"):
            self.finish(required_object(obj, "response", kind))
        elif kind == "response.failed":
            raise body_error({"error": required_object(obj, "response", kind).get("error")})
        elif kind == "error":
            raise body_error(obj, _dump(obj))
        # content parts, *.done events, annotations and the events of dropped items: nothing

    def item(self, index: int, item: dict[str, Any]) -> None:
        """A whole item, as a non-streamed body (or a stream's final response) gives it."""
        self._added(index, item)
        self._finished(index, item)

    def _added(self, index: int, item: dict[str, Any]) -> None:
        if index in self._items:
            return
        kind = required_text(item, "type", "item")
        builder = self._builder
        self._items[index] = (kind, False)
        self._ids[index] = optional_text(item, "id", "item")
        if kind in CALLS and not xai.runs_on_server(item, self._custom_tools):
            self._calls.added(index, kind, item)
            self._tools = True
        elif kind in server.SERVER_ITEMS or kind in CALLS:  # a server's: read whole when done
            self._server.add(index)
            self._dropped.add(index)
        elif kind not in _CANONICAL_ITEMS:  # kept whole (docs/contract.md §8)
            self._dropped.add(index)
            builder.opaque(index, kind, item)

    def _finished(self, index: int, item: dict[str, Any]) -> None:
        self._added(index, item)  # a server that skipped .added
        kind, done = self._items[index]
        if index in self._server and not done:
            self._items[index] = (kind, server.add_server_blocks(self._builder, index, item))
            return
        if index in self._dropped and not done:
            self._builder.opaque(index, kind, item)  # its whole form, once
            self._items[index] = (kind, True)
        if index in self._dropped or done:
            return
        builder = self._builder
        if kind == "message":
            if not builder.has_block(index):  # no deltas came: the item holds the text
                self._message_text(index, item)
            raw = {"id": item.get("id"), "phase": item.get("phase")}
        elif kind == "reasoning":
            summary = list_value(item.get("summary") or [], "reasoning item.summary")
            content = list_value(item.get("content") or [], "reasoning item.content")
            if not builder.has_block(index) and (texts := _texts(summary, content)):
                builder.thinking(index, "\n\n".join(texts))
            if signature := optional_text(item, "encrypted_content", "reasoning item"):
                item_id = item.get("id")
                held = {"id": item_id} if isinstance(item_id, str) else None
                builder.thinking_signature(index, signature, held)
            raw = {"id": item.get("id"), "summary": summary, "content": content or None}
        else:  # function_call, custom_tool_call
            whole = item.get("input" if kind == CUSTOM_CALL else "arguments")
            self._calls.done(index, kind, whole, cut_off=item.get("status") == "incomplete")
            raw = {"id": item.get("id"), "call_id": item.get("call_id")}
            if kind == CUSTOM_CALL:
                raw["type"] = CUSTOM_CALL
        self._items[index] = (kind, True)
        canonical = builder.index_of(index)
        if canonical is not None:  # kept now, so an early end (cancel, error) keeps it too
            builder.keep_raw(canonical, {k: v for k, v in raw.items() if v is not None})

    def _message_text(self, index: int, item: dict[str, Any]) -> None:
        where = "message item.content[]"
        offset = 0  # where the part starts in the block's text
        for part in list_value(item.get("content") or [], "message item.content"):
            part = object_value(part, where)
            kind = required_text(part, "type", where)
            text = optional_text(part, "text", where) if kind == "output_text" else None
            if kind == "refusal":
                self._refusal.append((index, optional_text(part, "refusal", where) or ""))
            if text:
                self._builder.text(index, text)
            for found in server.part_citations(part, offset, where, self._builder):
                self._builder.citation(index, found)
            offset += len(text or "")

    def finish(self, response: dict[str, Any]) -> None:
        """The final response: the items the stream never gave, usage and the stop reason;
        the message ends."""
        builder = self._builder
        builder.start(*_identity(response))
        if self._custom_tools is None:
            self._custom_tools = xai.declared_custom_tools(response)
        output = [
            object_value(item, "response.output[]")
            for item in list_value(response.get("output") or [], "response.output")
        ]
        final_ids = {optional_text(item, "id", "response.output[]") for item in output} - {None}
        streamed = dict(self._items), set(self._ids.values())  # before any of these is read
        for position, item in enumerate(output):
            if not self._seen(position, item, final_ids, *streamed):  # one the stream never gave
                index = position if position not in self._items else max(self._items) + 1
                self.item(index, item)
        kinds = [kind for kind, _ in self._items.values()]  # streamed, or read just above
        usage = optional_object(response, "usage", "response")
        read_usage(builder, usage, kinds, response.get("tool_usage"))
        builder.usage(service_tier=service_tier(response.get("service_tier")))
        words = "".join(said for _, said in self._refusal)
        stop = stop_reason(response, words if self._refusal else None, self._tools)
        if stop.explanation is None:
            self._refused_as_text()
        builder.stop(stop)
        self._mark_unpaired()
        builder.finish()
        self._done = True
        self._dropped = _EVERYTHING  # the hot path now hands every delta to _event

    def _refused_as_text(self) -> None:
        """Refusal words of a reply that did not end as a refusal: its text."""
        for index, words in self._refusal:
            if words:
                self._builder.text(index, words)
        self._refusal.clear()

    def _mark_unpaired(self) -> None:
        """Mark ``unpaired`` each kept reasoning item whose following item (in the order the
        items arrived) made no block or is reasoning too: what it led to was not kept."""
        builder = self._builder
        order = list(self._items)
        # an opaque item goes back too, and a server tool's (its blocks under (index, "call"))
        made = {i for i in order if builder.has_block(i) or builder.has_block((i, "call"))}
        for position, index in enumerate(order):
            kind, done = self._items[index]
            canonical = builder.index_of(index)
            if kind != "reasoning" or not done or index not in made or canonical is None:
                continue
            following = order[position + 1] if position + 1 < len(order) else None
            if following not in made or self._items[following][0] == "reasoning":
                builder.keep_raw(canonical, {"unpaired": True})

    def _seen(
        self,
        position: int,
        item: dict[str, Any],
        final_ids: set[Any],
        streamed: dict[int, tuple[str, bool]],
        streamed_ids: set[Any],
    ) -> bool:
        """Whether the final response's ``item`` at ``position`` is one the stream gave
        (``streamed``, by output index, and ``streamed_ids``: what the stream had given before
        the final response was read, so items of one body that share an id, as xAI's reasoning
        items do, are each read): by item id, or by ``output_index``. An endpoint that changes
        an item's id between events (GitHub Copilot's) still gives its index: an item of the
        type streamed at that index is that item, unless the streamed one is elsewhere in
        ``final_ids`` under its own id."""
        item_id = item.get("id")
        if item_id is None:
            return position in streamed  # nothing but its position to go by
        if item_id in streamed_ids:
            return True
        at = streamed.get(position)
        if at is None or at[0] != item.get("type", "message"):
            return False
        return self._ids[position] not in final_ids


def read_usage(
    builder: MessageBuilder,
    usage: dict[str, Any] | None,
    items: Sequence[str] = (),
    tool_usage: Any = None,
) -> None:
    """Canonical input counts uncached input only; OpenAI's ``input_tokens`` counts it all.
    ``items``: the types of the response's output items, whose web and file searches count;
    ``tool_usage``: the response's billed tool requests, which win where it has them."""
    with counts_of(builder):
        builder.usage(server_tools=server.requests_made(items, tool_usage, builder.provider))
    if not usage:
        return
    with counts_of(builder):
        read_counts(builder, usage)


def _identity(response: dict[str, Any]) -> tuple[str | None, str | None]:
    """The response's ``id`` and ``model``."""
    return optional_text(response, "id", "response"), optional_text(response, "model", "response")


def _texts(summary: list[Any], content: list[Any]) -> list[str]:
    """The text of a reasoning item's summary and content parts."""
    texts = []
    for part in (*summary, *content):
        text = object_value(part, "reasoning item part").get("text")
        if text:
            texts.append(text_value(text, "reasoning item part.text"))
    return texts


def _dump(obj: Any) -> str:
    return json.dumps(obj, default=repr)[:200]
