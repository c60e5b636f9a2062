"""Parsing JSON from a provider within limits: no NaN or Infinity, and bounded nesting.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON and
could never be sent back to a provider; it also recurses once per nesting level, so a body of
a few thousand ``[`` raises ``RecursionError``, and one just under the interpreter's limit
parses but breaks whatever walks it next (validation, re-encoding, copying). :func:`loads`
refuses all of these with a ``ValueError``, which each caller turns into its own classified
error.

It parses with pydantic_core's ``from_json`` (jiter, in Rust; several times faster than
``json`` on the small objects a stream is made of), which refuses NaN and Infinity itself
when told to. What jiter refuses is read again by Python's ``json``, which has the final word:
so the few documents jiter is stricter about (lone UTF-16 surrogate escapes such as
``"\\ud83d"``, which a provider may send when it cuts a character in two) parse exactly as
before, and what neither accepts fails with ``json``'s message.
"""

from __future__ import annotations

import copy
import json
import marshal
import re
from typing import Any

from pydantic_core import from_json

MAX_DEPTH = 100
"""The deepest nesting of objects and arrays accepted in anything a provider sends."""
SHALLOW_LENGTH = 2 * (MAX_DEPTH + 1)
"""No valid JSON text shorter than this nests deeper than :data:`MAX_DEPTH`: each level takes
an opening and a closing bracket."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JSONLimitError(ValueError):
    """The text is JSON that metis refuses to hold (too deep, or a NaN/Infinity constant)."""


def _refuse_constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether objects and arrays in ``text`` nest deeper than ``limit`` (brackets inside
    strings do not count). Text with few brackets is answered without scanning it."""
    if text.count("{") + text.count("[") <= limit:
        return False
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def nested_deeper(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether the objects and arrays of a parsed value nest deeper than ``limit``."""
    level: list[Any] = [value] if value.__class__ in (dict, list) else []
    depth = 0
    while level:
        inner: list[Any] = []
        for container in level:
            cls = container.__class__
            if cls is dict:
                container = container.values()
            elif cls is not list:
                continue
            for item in container:
                cls = item.__class__
                if cls is dict or cls is list:
                    inner.append(item)
        depth += 1
        if depth > limit:
            return True
        level = inner
    return False


def loads(text: str | bytes, *, text_only: bool = False) -> Any:
    """``json.loads`` within the limits above; any failure is a ``ValueError`` (invalid JSON,
    invalid UTF-8, a refused constant, nesting too deep). ``text_only``: a string holding a
    lone UTF-16 surrogate (a ``"\\ud800"`` escape with no pair, which no UTF-8 holds) is one
    too, a :class:`LoneSurrogateError` (looked for only when jiter refused the document, as
    it refuses every such one)."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8-sig")  # UnicodeDecodeError is a ValueError
    if text[:1] == "\ufeff":
        text = text.lstrip("\ufeff")
    few = text.count("{") + text.count("[") <= MAX_DEPTH  # too few brackets to be too deep
    try:
        value = from_json(text, allow_inf_nan=False)
    except (ValueError, TypeError):  # TypeError: a lone surrogate, which no UTF-8 can hold
        pass  # refused by jiter (also past its own nesting limit): Python's json decides
    else:
        # The parsed value's containers are walked, not the text: far fewer steps than
        # the brackets of a long reply, whose strings need no scanning.
        if not few and nested_deeper(value, MAX_DEPTH):
            raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels")
        return value
    if not few and too_deep(text):
        raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        value = _DECODER.decode(text)
    except RecursionError:  # a limit lowered below MAX_DEPTH's needs by the caller's stack
        raise JSONLimitError("nested too deep to parse") from None
    if text_only and _lone_surrogate(value):
        raise LoneSurrogateError("a string holds a lone UTF-16 surrogate, which is not text")
    return value


class LoneSurrogateError(ValueError):
    """A document with a string no UTF-8 can hold (a lone ``\\ud800`` escape)."""


def _lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_copy(value: Any) -> Any:
    """A copy of a JSON value: its objects and arrays made anew all the way down; anything
    else copied as ``copy.deepcopy`` does. A tool's schema is copied this way for a body of
    its own (metis/wire/encoded_messages.py ``sent_schema``): it is JSON, checked before it
    reaches an encoder (:mod:`metis.adapter.sendable`), so it holds no cycle. Written and
    read back by ``marshal`` (version 2: exact types, no shared references; in C, a quarter
    less CPU warm than a walk in Python and 25 fewer Python calls for a small schema); a value
    marshal cannot write (a subclass of ``str``, an object of the application's) is walked
    instead."""
    try:
        return marshal.loads(marshal.dumps(value, 2))
    except ValueError:
        return _walked_copy(value)


def _walked_copy(value: Any) -> Any:
    cls = value.__class__
    if cls is dict:
        return {key: _walked_copy(item) for key, item in value.items()}
    if cls is list:
        return [_walked_copy(item) for item in value]
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value
    return copy.deepcopy(value)
