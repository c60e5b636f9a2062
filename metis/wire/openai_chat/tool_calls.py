"""Streamed Chat Completions tool calls, read by their ``index`` in any order.

A call's fragments share its ``index``; its ``id`` and ``name`` come on its first fragment only.
Most servers send one call whole before the next starts, but some interleave them (index 0's
first arguments, index 1's start, more of index 0, ...). The canonical stream has one tool call
open at a time with indexes that never go back (docs/contract.md §2), so a call that starts
while the one before it is unfinished (its arguments not yet a whole JSON value) waits, its
fragments kept, until that one is whole or the reply ends; then it is told in order. Calls sent
one after the other stream as they come.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from metis.errors import ProtocolError
from metis.wire.builder import MessageBuilder
from metis.wire.freeform import CLOSING, OPENING, text_fragment
from metis.wire.openai_chat.errors import dump
from metis.wire.openai_chat.grammar_calls import GrammarCall
from metis.wire.openai_chat.read import tool_call_id
from metis.wire.read import malformed, object_value, optional_text

CUSTOM_RAW = {"type": "custom"}
"""Kept on a custom call's block: it goes back as a custom call (encode.py)."""

SIGNATURE = "thoughtSignature"
"""The ``provider_raw.data`` key of a call's thought signature, as the Gemini stack keeps it.
Gemini's OpenAI-compatible endpoint sends it as the call's
``extra_content.google.thought_signature`` (docs/contract.md §7), whole and streamed."""


def thought_signature(item: dict[str, Any], where: str) -> str | None:
    """The thought signature on a ``tool_calls[]`` entry or fragment, if it has one."""
    extra = item.get("extra_content")
    if extra is None:
        return None
    google = object_value(extra, f"{where}.extra_content").get("google")
    if google is None:
        return None
    found = object_value(google, f"{where}.extra_content.google").get("thought_signature")
    if found is None or found.__class__ is str:
        return found or None
    raise malformed(f"{where}.extra_content.google.thought_signature", "a string", found)


class _JsonEnd:
    """Whether the text fed so far holds a whole JSON object or array (strings and escapes
    followed across fragments)."""

    __slots__ = ("_depth", "_escaped", "_in_string", "whole")

    def __init__(self) -> None:
        self._depth, self._in_string, self._escaped, self.whole = 0, False, False, False

    def feed(self, text: str) -> None:
        for char in text:
            if self.whole:
                return
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                self.whole = self._depth <= 0


class _Call:
    __slots__ = ("custom", "end", "index", "key", "name", "pieces", "signature", "tool_id")

    def __init__(self, index: Any, tool_id: str, name: str, custom: bool) -> None:
        self.index, self.tool_id, self.name, self.custom = index, tool_id, name, custom
        self.signature: str | None = None  # kept until the call is told
        self.pieces: list[str] = []
        self.key: Hashable | None = None  # set when told to the builder
        self.end: _JsonEnd | None = None  # followed only while a later call waits on it


class StreamedToolCalls:
    """The tool calls of one streamed reply; ``keys`` are the builder keys of those told."""

    __slots__ = ("_builder", "_by_index", "_grammar", "_head", "_waiting", "custom", "keys")

    def __init__(self, builder: MessageBuilder, grammar: bool = False) -> None:
        """``grammar``: a fragment naming no function, before any call, is TGI's grammar
        text (:mod:`metis.wire.openai_chat.grammar_calls`)."""
        self._builder = builder
        self._grammar = GrammarCall() if grammar else None
        self._by_index: dict[Any, _Call] = {}
        self._head: _Call | None = None  # the call last told, still taking fragments
        self._waiting: list[_Call] = []  # calls started while the head was unfinished
        self.keys: list[Hashable] = []
        self.custom: set[Hashable] = set()  # the keys of custom (freeform) calls

    @property
    def any(self) -> bool:
        return bool(self.keys or self._waiting or (self._grammar and self._grammar.pieces))

    def fragment(self, item: dict[str, Any]) -> None:
        """One ``delta.tool_calls[]`` entry."""
        index, tool_id = _tool_index(item), optional_text(item, "id", "delta.tool_calls[]")
        custom = item.get("type") == "custom" or "custom" in item
        field = "custom" if custom else "function"
        function = object_value(item.get(field) or {}, f"delta.tool_calls[].{field}")
        if self._grammar is not None and not self._by_index and function.get("name") is None:
            self._grammar.add(arguments(function.get("arguments")))
            return
        call = self._by_index.get(index)
        if call is None or (tool_id and tool_id != call.tool_id):
            # A new call; so is an index reused with another id (some compatible servers
            # send every call as index 0).
            name = required_name(function, "name")
            call = _Call(index, tool_call_id(item), name, custom)
            self._by_index[index] = call
            self._waiting.append(call)
        if call.custom:
            piece = text_fragment(text) if (text := custom_input(function.get("input"))) else ""
        else:
            piece = arguments(function.get("arguments"))
        if piece:
            self._add(call, piece)
        if signature := thought_signature(item, "delta.tool_calls[]"):
            self._sign(call, signature)
        if self._waiting:
            self._tell_waiting(force=False)

    def notified_error(self) -> str | None:
        """The message of the grammar's text when it is TGI's ``notify_error`` call, taken
        (:meth:`GrammarCall.take_error`); None for anything else."""
        return self._grammar.take_error() if self._grammar is not None else None

    def tell_all(self) -> None:
        """The reply ended (or stopped): every waiting call is told, in order."""
        self._tell_waiting(force=True)
        if self._grammar is not None and (named := self._grammar.take()) is not None:
            name, text = named
            self._tell(_Call(None, tool_call_id({}), name, custom=False))
            self._builder.tool_input(self.keys[-1], text)

    def _sign(self, call: _Call, signature: str) -> None:
        call.signature = signature
        if call.key is not None:
            self._builder.keep_raw(self._builder.index_of(call.key) or 0, {SIGNATURE: signature})

    def _add(self, call: _Call, piece: str) -> None:
        if call.key is None:
            call.pieces.append(piece)
            return
        self._builder.tool_input(call.key, piece)
        if call.end is not None:
            call.end.feed(piece)

    def _tell_waiting(self, force: bool) -> None:
        while self._waiting and (force or self._head_done()):
            self._tell(self._waiting.pop(0))

    def _head_done(self) -> bool:
        head = self._head
        if head is None or head.custom or self._by_index.get(head.index) is not head:
            return True  # no fragment can reach it any more, or none says where it ends
        if head.end is None:
            head.end = _JsonEnd()
            head.end.feed("".join(head.pieces))
        return head.end.whole

    def _tell(self, call: _Call) -> None:
        builder = self._builder
        call.key = key = ("tool", len(self.keys))
        self.keys.append(key)
        builder.tool_start(key, call.tool_id, call.name)
        if call.custom:
            self.custom.add(key)
            builder.keep_raw(builder.index_of(key) or 0, CUSTOM_RAW)
            builder.tool_input(key, OPENING)
        if call.signature is not None:
            builder.keep_raw(builder.index_of(key) or 0, {SIGNATURE: call.signature})
        for piece in call.pieces:
            builder.tool_input(key, piece)
        self._head = call

    def close_all(self, cut_off: bool) -> None:
        """End every call at the finish (no fragment follows a ``finish_reason``); a custom
        call's input is closed unless it is the last and the output limit cut it off."""
        for key in self.keys:
            if key in self.custom and not (cut_off and key == self.keys[-1]):
                self._builder.tool_input(key, CLOSING)
            self._builder.close(key)


def message_calls(message: dict[str, Any]) -> list[Any]:
    """A whole message's ``tool_calls``; failing those, deprecated function calling's one
    ``function_call`` (it has no id: the reader mints one) as a function call. One with no
    name and no arguments is none (Snowflake Cortex fills every field, ``""`` when unused)."""
    calls = listed(message.get("tool_calls"), "message.tool_calls")
    if not calls and (legacy := message.get("function_call")) is not None:
        legacy = object_value(legacy, "message.function_call")
        return [{"type": "function", "function": legacy}] if _said(legacy) else []
    return calls


def listed(value: Any, where: str) -> list[Any]:
    """A ``tool_calls`` field: its list, or its one call as a list (Text Generation Inference
    1.4.0 to 1.4.3 send a whole reply's call as an object, 1.4.3 to 3.1 a fragment)."""
    if value is None or value.__class__ is list:
        return value or []
    if value.__class__ is dict:
        return [value]
    raise malformed(where, "a list", value)


def legacy_fragment(delta: dict[str, Any]) -> dict[str, Any] | None:
    """A delta's ``function_call`` (deprecated function calling) as a ``tool_calls[]``
    fragment: one call, its name on the first fragment."""
    legacy = delta.get("function_call")
    if legacy is None:
        return None
    legacy = object_value(legacy, "delta.function_call")
    return {"function": legacy} if _said(legacy) else None


def _said(function: dict[str, Any]) -> bool:
    """A ``function_call`` that names a function or carries arguments."""
    return bool(function.get("name") or function.get("arguments"))


def arguments(value: Any) -> str:
    if value is None or value.__class__ is str:
        return value or ""
    if value.__class__ is dict:  # a few compatible servers send an object, not a string
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    raise malformed("tool_calls[].function.arguments", "a string", value)


def custom_input(value: Any) -> str:
    if value is None or value.__class__ is str:
        return value or ""
    raise malformed("tool_calls[].custom.input", "a string", value)


def _tool_index(item: dict[str, Any]) -> int | str | None:
    """The ``index`` a streamed call's fragments share (absent from some servers)."""
    index = item.get("index")
    if index is None or index.__class__ is int or index.__class__ is str:
        return index
    raise malformed("delta.tool_calls[].index", "a whole number", index)


def required_name(obj: dict[str, Any], field: str) -> str:
    value = obj.get(field)
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"openai_chat sent a tool call without {field!r}: {dump(obj)}")
    return value
