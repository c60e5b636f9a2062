"""Recovering what parses cleanly from a truncated JSON object (docs/contract.md §2).

Both functions parse with pydantic_core's ``from_json`` (jiter): a cut-short object is closed
off by its partial mode (``allow_partial``), after the text has been cut back to the end of its
last complete top-level member.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_core import from_json

_MAX_ATTEMPTS = 64
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},"]', re.DOTALL)
"""A whole string, or one character of the structure (a lone quote opens a cut-off string)."""
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
"""A UTF-16 surrogate escape: jiter refuses one alone, Python's json reads it."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def parse_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object, or None when it is not exactly one.

    Python's ``NaN``/``Infinity`` extensions are refused: they are not JSON, and an input holding
    them could not be sent back to any provider. Nesting too deep for the parser is refused too,
    rather than raising ``RecursionError`` out of a stream. What jiter refuses is read again by
    Python's ``json`` (lone UTF-16 surrogate escapes parse as it reads them)."""
    if not text.strip():
        return {}
    try:
        value = from_json(text, allow_inf_nan=False)
    except TypeError:  # a str no UTF-8 can hold (a lone surrogate): json reads it
        try:
            value = _DECODER.decode(text)
        except (ValueError, RecursionError):
            return None
    except ValueError as exc:
        if not (_SURROGATE.search(text) or "recursion" in str(exc)):
            return None  # json would refuse it too
        try:
            value = _DECODER.decode(text)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def parse_partial_object(text: str) -> dict[str, Any]:
    """The largest prefix of a truncated JSON object that parses, closed off; else ``{}``.

    ``{"path": "a.txt", "limit": 1`` gives ``{"path": "a.txt"}``: the last member may still
    have been growing, so only top-level members followed by a comma (or whose value's closing
    bracket arrived) are kept. A member whose value was cut off is left out whole, never
    shortened: ``{"a": 1, "b": [1, 2`` gives ``{"a": 1}``, not ``{"a": 1, "b": [1]}``.
    """
    whole = parse_object(text)
    if whole is not None:
        return whole
    if text.lstrip()[:1] != "{":
        return {}
    for end, closer in reversed(_member_ends(text)[-_MAX_ATTEMPTS:]):
        try:  # the partial mode closes the object the cut left open
            value = from_json(text[:end], allow_partial=True, allow_inf_nan=False)
        except (ValueError, TypeError):  # refused by jiter: json decides (NaN, depth, surrogates)
            value = parse_object(text[:end] + closer)
        if isinstance(value, dict):
            return value
    return {}


def _member_ends(text: str) -> list[tuple[int, str]]:
    """Where the top-level members of the object opening ``text`` are known to be complete
    (at each comma between two of them, after a member's closing bracket, and after the
    object's own closing brace, where reading stops), each with what closes the text there."""
    ends: list[tuple[int, str]] = []
    depth = 0
    for match in _TOKEN.finditer(text):
        mark = match.group()
        if mark[0] == '"':
            if len(mark) == 1:  # a string the text ends inside: nothing after it is complete
                break
            continue
        if mark in "[{":
            depth += 1
        elif mark in "]}":
            depth -= 1
            if depth == 1:
                ends.append((match.end(), "}"))
            elif depth <= 0:
                ends.append((match.end(), ""))
                break
        elif depth == 1:
            ends.append((match.start(), "}"))
    return ends
