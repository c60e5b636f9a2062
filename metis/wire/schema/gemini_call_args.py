"""Gemini's streamed function call arguments (``functionCallingConfig.
streamFunctionCallArguments``, Vertex AI and Gemini 3), put back together into whole calls.

With them on, a call comes as several ``functionCall`` parts: the first gives the ``name`` (and
the part's thought signature) with ``willContinue: true``; the next give ``partialArgs``, each a
``jsonPath`` (``$.operations[0].price``) and one value (``stringValue``, a string's next piece;
``numberValue``, ``boolValue``, ``nullValue``); the call ends with a part without
``willContinue`` (an empty ``functionCall: {}``, or its last arguments). Seen in vercel/ai's
recordings of ``gemini-3.1-pro-preview`` and ``gemini-3-flash-preview`` on Vertex AI.

:class:`StreamedCallArgs` holds such a call until it ends, then gives it as one whole
``functionCall`` part (name, ``args``, the first part's other fields), read as any whole call.
A call still open when another part, another call or the end of the reply comes is given
then, with the arguments that arrived.
"""

from __future__ import annotations

import re
from typing import Any

from metis.wire.read import malformed

_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")
_VALUES = ("stringValue", "numberValue", "boolValue", "nullValue")


class StreamedCallArgs:
    """The function call whose arguments are streaming, if any (one at a time)."""

    __slots__ = ("_args", "_first", "_where", "pending")

    def __init__(self, where: str) -> None:
        self._where = where
        self._first: dict[str, Any] | None = None  # the part that named the call
        self._args: dict[str, Any] = {}
        self.pending = False
        """Whether a call is open (read for every chunk: an attribute, not a property)."""

    def feed(self, part: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """The whole calls ``part`` ended (to read before it) and whether it was taken here
        (a piece of a streamed call: nothing else reads it)."""
        call = part.get("functionCall")
        if call.__class__ is not dict:
            return self.flush(), False
        done: list[dict[str, Any]] = []
        if self._first is not None and "name" in call:  # another call: the open one ended
            done = self.flush()
        if self._first is None:
            if call.get("willContinue") is not True or "name" not in call:
                return done, False
            named = {k: v for k, v in call.items() if k not in ("willContinue", "partialArgs")}
            self._first = {**part, "functionCall": named}
            self.pending = True
            args = call.get("args")
            self._args = dict(args) if isinstance(args, dict) else {}
        self._apply(call.get("partialArgs") or [])
        if call.get("willContinue") is True:
            return done, True
        return done + self.flush(), True

    def flush(self) -> list[dict[str, Any]]:
        """The open call, ended with the arguments that arrived (none open: nothing)."""
        first = self._first
        if first is None:
            return []
        self._first = None
        self.pending = False
        return [{**first, "functionCall": {**first["functionCall"], "args": self._args}}]

    def _apply(self, pieces: Any) -> None:
        where = f"{self._where} functionCall.partialArgs"
        if pieces.__class__ is not list:
            raise malformed(where, "a list", pieces)
        for piece in pieces:
            if piece.__class__ is not dict:
                raise malformed(f"{where}[]", "an object", piece)
            path = self._path(piece.get("jsonPath"))
            kind = next((k for k in _VALUES if k in piece), None)
            if kind is None:
                continue  # a path alone says nothing yet
            value = None if kind == "nullValue" else piece[kind]
            _put(self._args, path, value, append=kind == "stringValue")

    def _path(self, text: Any) -> list[str | int]:
        where = f"{self._where} functionCall.partialArgs[].jsonPath"
        if text.__class__ is not str or not text.startswith("$"):
            raise malformed(where, "a JSON path", text)
        steps: list[str | int] = []
        position = 1
        while position < len(text):
            step = _STEP.match(text, position)
            if step is None:
                raise malformed(where, "a JSON path", text)
            name, number, quoted, double = step.groups()
            steps.append(int(number) if number is not None else name or quoted or double or "")
            position = step.end()
        if not steps:
            raise malformed(where, "a JSON path below $", text)
        return steps


def _put(args: dict[str, Any], path: list[str | int], value: Any, append: bool) -> None:
    """Set ``value`` at ``path`` in ``args`` (a string piece is added to what is there),
    making the objects and lists on the way."""
    here: Any = args
    for step, following in zip(path, [*path[1:], None], strict=True):
        if following is None:
            _set(here, step, value, append)
            return
        child = _get(here, step)
        if not isinstance(child, dict | list):
            child = [] if isinstance(following, int) else {}
            _set(here, step, child, append=False)
        here = child


def _get(container: Any, step: str | int) -> Any:
    if isinstance(container, list) and isinstance(step, int):
        return container[step] if step < len(container) else None
    return container.get(step) if isinstance(container, dict) else None


def _set(container: Any, step: str | int, value: Any, append: bool) -> None:
    if isinstance(container, list) and isinstance(step, int):
        container.extend([None] * (step + 1 - len(container)))
        old = container[step]
        container[step] = old + value if append and isinstance(old, str) else value
    elif isinstance(container, dict):
        old = container.get(step)
        container[step] = old + value if append and isinstance(old, str) else value
