"""The input of a Responses call item (``function_call``, ``custom_tool_call``), as the stream
gives it: the item's own text when ``.added``, the pieces of its ``*.delta`` events, and its
whole text on the first of ``response.function_call_arguments.done`` /
``response.custom_tool_call_input.done`` and ``response.output_item.done``, which ends the call.

A custom call's text is written as the JSON of ``{"input": text}`` (:mod:`metis.wire.freeform`).
The call ends at its input's ``.done`` event, not only at its item's: xAI's Responses API adds
later items (web searches) before it sends the call's ``output_item.done``, and a call still open
when the next item opens would be ended there without its last piece.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from metis.wire.builder import MessageBuilder
from metis.wire.freeform import CLOSING, OPENING, text_fragment
from metis.wire.openai_responses.custom import CUSTOM_CALL
from metis.wire.read import malformed, required_text

CALLS = ("function_call", CUSTOM_CALL)
INPUT_DONE = {
    "response.function_call_arguments.done": ("function_call", "arguments"),
    "response.custom_tool_call_input.done": (CUSTOM_CALL, "input"),
}
"""The events that give a call's whole input: the call's type and the field that holds it."""


class CallInputs:
    """The input of every call item of one reply, written to ``builder`` by output index."""

    __slots__ = ("_builder", "_ended", "_fed")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._fed: set[Hashable] = set()  # calls whose input arrived, in pieces or whole
        self._ended: set[Hashable] = set()

    def added(self, index: Hashable, kind: str, item: dict[str, Any]) -> None:
        """A call item began: its tool call starts, with whatever input it already holds."""
        builder = self._builder
        call_id = required_text(item, "call_id", f"{kind} item")
        builder.tool_start(index, call_id, required_text(item, "name", f"{kind} item"))
        if kind == CUSTOM_CALL:
            builder.tool_input(index, OPENING)
        self._whole(index, kind, item.get(_FIELD[kind]))

    def piece(self, index: Hashable, kind: str, fragment: str) -> None:
        """One ``*.delta`` piece of the input."""
        if fragment and index not in self._ended:
            if kind == CUSTOM_CALL:
                fragment = text_fragment(fragment)
            self._builder.tool_input(index, fragment)
            self._fed.add(index)

    def done(self, index: Hashable, kind: str, whole: Any, cut_off: bool = False) -> None:
        """The whole input is known (``whole``, used when no piece came): the call ends,
        once. ``cut_off``: the item is incomplete, its input unfinished (no closing)."""
        if index in self._ended:
            return
        self._ended.add(index)
        self._whole(index, kind, whole)
        if kind == CUSTOM_CALL and not cut_off:
            self._builder.tool_input(index, CLOSING)
        self._builder.close(index)

    def _whole(self, index: Hashable, kind: str, value: Any) -> None:
        if index in self._fed:
            return
        if kind == CUSTOM_CALL:
            text = _custom_input(value)
            fragment = text_fragment(text) if text else ""
        else:
            fragment = _arguments(value)
        if fragment:
            self._builder.tool_input(index, fragment)
            self._fed.add(index)


_FIELD = {"function_call": "arguments", CUSTOM_CALL: "input"}


def _arguments(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, dict):  # a few compatible servers send an object, not a string
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    raise malformed("function_call item.arguments", "a string", value)


def _custom_input(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    raise malformed("custom_tool_call item.input", "a string", value)
